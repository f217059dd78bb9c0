// Symbol visibility for libpthload: the library builds with hidden visibility by default.
#pragma once

#if defined(_WIN32)
#if defined(PTHLOAD_BUILDING)
#define PTHLOAD_API __declspec(dllexport)
#else
#define PTHLOAD_API
#endif
#else
#define PTHLOAD_API __attribute__((visibility("default")))
#endif
