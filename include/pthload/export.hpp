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

// A type nested in a PTHLOAD_API class that is the library's own (a private part, defined or
// used in lib/ only): its members are not exported, so they are no part of the ABI.
#if defined(_WIN32)
#define PTHLOAD_HIDDEN
#else
#define PTHLOAD_HIDDEN __attribute__((visibility("hidden")))
#endif
