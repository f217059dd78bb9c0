// Symbol visibility for libpthload: the library builds with hidden visibility by default.
// Plain preprocessor only: the C header pthload.h includes it too.
#pragma once

#if defined(_WIN32)
#if defined(PTHLOAD_BUILDING)
#define PTHLOAD_API __declspec(dllexport)
#elif defined(PTHLOAD_STATIC)
// A consumer linking the static library on Windows defines PTHLOAD_STATIC.
#define PTHLOAD_API
#else
#define PTHLOAD_API __declspec(dllimport)
#endif
#else
#define PTHLOAD_API __attribute__((visibility("default")))
#endif
