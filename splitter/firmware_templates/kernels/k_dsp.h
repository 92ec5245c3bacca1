/*
 * The DSP instructions of the int8 kernels (kernels_q8_opt.c) as K_* macros on uint32_t words:
 * GCC's ACLE intrinsics (arm_acle.h: __sxtb16, __sxtab16, __smlad, __smlabb, __smlatt, __smlatb) when the
 * core has the DSP extension (__ARM_FEATURE_DSP: Cortex-M4, M7, M33 with DSP), else the portable
 * emulation of k_dsp_emu.h (host builds; a _dsp kernel run on a Cortex-M0+ would be correct but
 * slow, and the generator never picks one there). K_DSP_EMULATE forces the emulation.
 * K_LD4 / K_ST4 move 4 bytes at any alignment (one LDR / STR on Armv7-M, which allows unaligned
 * word access; byte moves elsewhere), K_ROR8 rotates right by 8; K_SXTB16_ROR8 / K_SXTAB16_ROR8
 * extend bytes 1 and 3 (the instructions' ROR #8 form).
 */
#ifndef SPLITTER_K_DSP_H
#define SPLITTER_K_DSP_H

#include <stdint.h>

#define K_ROR8(x) (((uint32_t)(x) >> 8) | ((uint32_t)(x) << 24))

#if defined(__ARM_FEATURE_DSP) && !defined(K_DSP_EMULATE)
#include <arm_acle.h>
#define K_DSP_NATIVE 1
#define K_SXTB16(x) ((uint32_t)__sxtb16((int32_t)(x)))
#define K_SXTAB16(a, x) ((uint32_t)__sxtab16((int32_t)(a), (int32_t)(x)))
#define K_SMLAD(a, b, acc) __smlad((int32_t)(a), (int32_t)(b), (acc))
#define K_SMLABB(a, b, acc) __smlabb((int32_t)(a), (int32_t)(b), (acc))
#define K_SMLATT(a, b, acc) __smlatt((int32_t)(a), (int32_t)(b), (acc))
#define K_SMLATB(a, b, acc) __smlatb((int32_t)(a), (int32_t)(b), (acc))
/* SXTB16 / SXTAB16 of x rotated right by 8 (bytes 1 and 3) in one instruction: GCC does not
 * fold the rotation into the intrinsic, so these two are inline assembly. */
static inline uint32_t K_SXTB16_ROR8(uint32_t x)
{
    uint32_t r;
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(x));
    return r;
}
static inline uint32_t K_SXTAB16_ROR8(uint32_t a, uint32_t x)
{
    uint32_t r;
    __asm__("sxtab16 %0, %1, %2, ror #8" : "=r"(r) : "r"(a), "r"(x));
    return r;
}
#define K_SSAT8(v) __ssat((v), 8)
/* SMMULR: (a * b + 2^31) >> 32, the rounded high word of the 64-bit product. */
static inline int32_t K_SMMULR(int32_t a, int32_t b)
{
    int32_t r;
    __asm__("smmulr %0, %1, %2" : "=r"(r) : "r"(a), "r"(b));
    return r;
}
/* PKHBT (a & 0xFFFF) | (b << 16) and PKHTB (a & 0xFFFF0000) | ((uint32_t)b >> 16): two
 * halfwords of two words packed into one. */
static inline uint32_t K_PKHBT16(uint32_t a, uint32_t b)
{
    uint32_t r;
    __asm__("pkhbt %0, %1, %2, lsl #16" : "=r"(r) : "r"(a), "r"(b));
    return r;
}
static inline uint32_t K_PKHTB16(uint32_t a, uint32_t b)
{
    uint32_t r;
    __asm__("pkhtb %0, %1, %2, asr #16" : "=r"(r) : "r"(a), "r"(b));
    return r;
}
/* SMMLAR: (a * b + 2^31 + c * 2^32) >> 32, the rounded high word plus c. */
static inline int32_t K_SMMLAR(int32_t a, int32_t b, int32_t c)
{
    int32_t r;
    __asm__("smmlar %0, %1, %2, %3" : "=r"(r) : "r"(a), "r"(b), "r"(c));
    return r;
}
/* w with bits [lsb, lsb + 8) replaced by the low byte of v (BFI). */
#define K_BFI8(w, v, lsb) k_bfi8_##lsb((w), (v))
#define K_BFI8_ASM(lsb)                                                                        \
    static inline uint32_t k_bfi8_##lsb(uint32_t w, uint32_t v)                                \
    {                                                                                          \
        __asm__("bfi %0, %1, #" #lsb ", #8" : "+r"(w) : "r"(v));                               \
        return w;                                                                              \
    }
K_BFI8_ASM(8)
K_BFI8_ASM(16)
K_BFI8_ASM(24)
/* Byte-wise signed max / min of four int8 lanes: SSUB8 sets the GE flags, SEL picks (one asm
 * statement, so nothing can clobber the flags in between). */
static inline uint32_t K_MAX8(uint32_t a, uint32_t b)
{
    uint32_t r;
    __asm__("ssub8 %0, %1, %2\n\tsel %0, %1, %2" : "=&r"(r) : "r"(a), "r"(b) : "cc");
    return r;
}
static inline uint32_t K_MIN8(uint32_t a, uint32_t b)
{
    uint32_t r;
    __asm__("ssub8 %0, %2, %1\n\tsel %0, %1, %2" : "=&r"(r) : "r"(a), "r"(b) : "cc");
    return r;
}
#else
#include "k_dsp_emu.h"
#define K_SSAT8(v) k_emu_ssat8(v)
#define K_SMMULR(a, b) k_emu_smmulr((a), (b))
#define K_SMMLAR(a, b, c) k_emu_smmlar((a), (b), (c))
#define K_PKHBT16(a, b) (((uint32_t)(a) & 0xFFFFu) | ((uint32_t)(b) << 16))
#define K_PKHTB16(a, b) (((uint32_t)(a) & 0xFFFF0000u) | ((uint32_t)(b) >> 16))
#define K_BFI8(w, v, lsb) (((w) & ~(0xFFu << (lsb))) | (((uint32_t)(v) & 0xFFu) << (lsb)))
#define K_MAX8(a, b) k_emu_max8((a), (b))
#define K_MIN8(a, b) k_emu_min8((a), (b))
#define K_DSP_NATIVE 0
#define K_SXTB16(x) k_emu_sxtb16(x)
#define K_SXTAB16(a, x) k_emu_sxtab16((a), (x))
#define K_SMLAD(a, b, acc) k_emu_smlad((a), (b), (acc))
#define K_SMLABB(a, b, acc) k_emu_smlabb((a), (b), (acc))
#define K_SMLATT(a, b, acc) k_emu_smlatt((a), (b), (acc))
#define K_SMLATB(a, b, acc) k_emu_smlatb((a), (b), (acc))
#define K_SXTB16_ROR8(x) k_emu_sxtb16(K_ROR8(x))
#define K_SXTAB16_ROR8(a, x) k_emu_sxtab16((a), K_ROR8(x))
#endif

static inline uint32_t K_LD4(const void *p)
{
    uint32_t v;
    __builtin_memcpy(&v, p, 4);
    return v;
}

static inline void K_ST4(void *p, uint32_t v)
{
    __builtin_memcpy(p, &v, 4);
}

#endif /* SPLITTER_K_DSP_H */
