/*
 * Minimal libc pieces for -nostdlib firmware builds: gcc emits calls to memcpy/memset (struct
 * copies, zero-initialisation, loop idioms) even without a C library. Weak, so a firmware that
 * links newlib or defines its own keeps those. Host builds must not compile this file.
 */
#include <stddef.h>

__attribute__((weak)) void *memcpy(void *restrict dst, const void *restrict src, size_t n)
{
    unsigned char *d = (unsigned char *)dst;
    const unsigned char *s = (const unsigned char *)src;
    while (n--) *d++ = *s++;
    return dst;
}

__attribute__((weak)) void *memmove(void *dst, const void *src, size_t n)
{
    unsigned char *d = (unsigned char *)dst;
    const unsigned char *s = (const unsigned char *)src;
    if (d < s) {
        while (n--) *d++ = *s++;
    } else {
        while (n--) d[n] = s[n];
    }
    return dst;
}

__attribute__((weak)) void *memset(void *dst, int c, size_t n)
{
    unsigned char *d = (unsigned char *)dst;
    while (n--) *d++ = (unsigned char)c;
    return dst;
}
