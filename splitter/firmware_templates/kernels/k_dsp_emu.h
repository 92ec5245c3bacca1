/*
 * Portable C emulation of the Armv7E-M DSP instructions the int8 kernels use (SXTB16, SXTAB16,
 * SMLAD, SMLABB, SMLATT, SMMULR, SMMLAR, SSAT, SSUB8 + SEL), for cores without the DSP extension and for host builds. Each
 * function computes exactly what the instruction writes to its destination register (Arm v7-M
 * Architecture Reference Manual, DDI 0403E, A7.7.178 SXTB16, A7.7.175 SXTAB16, A7.7.139 SMLAD,
 * A7.7.137 SMLABB/SMLATT, SMMULR, SSAT, and SSUB8 + SEL as byte-wise maximum / minimum); the Q flag the MAC instructions set on overflow is not modelled (the
 * kernels never read it). tests/test_kernels_q8_opt.py checks these against the instructions
 * themselves under QEMU. Kept apart from k_dsp.h so that the emulation is never mistaken for
 * the real thing: k_dsp.h includes it only when __ARM_FEATURE_DSP is not defined (or when
 * K_DSP_EMULATE forces it, for that test).
 */
#ifndef SPLITTER_K_DSP_EMU_H
#define SPLITTER_K_DSP_EMU_H

#include <stdint.h>

/* The low 16 bits of v as a signed value. */
static inline int32_t k_emu_lo16(uint32_t v)
{
    return (int32_t)(int16_t)(uint16_t)(v & 0xFFFFu);
}

/* The high 16 bits of v as a signed value. */
static inline int32_t k_emu_hi16(uint32_t v)
{
    return (int32_t)(int16_t)(uint16_t)(v >> 16);
}

/* Two signed halfwords (each taken modulo 2^16) packed as lo | hi << 16. */
static inline uint32_t k_emu_pack16(int32_t lo, int32_t hi)
{
    return ((uint32_t)lo & 0xFFFFu) | (((uint32_t)hi & 0xFFFFu) << 16);
}

/* SXTB16: bytes 0 and 2 of x, sign-extended to halfwords. */
static inline uint32_t k_emu_sxtb16(uint32_t x)
{
    return k_emu_pack16((int8_t)(uint8_t)(x & 0xFFu), (int8_t)(uint8_t)((x >> 16) & 0xFFu));
}

/* SXTAB16: a's halfwords plus bytes 0 and 2 of x sign-extended, each sum modulo 2^16. */
static inline uint32_t k_emu_sxtab16(uint32_t a, uint32_t x)
{
    const uint32_t e = k_emu_sxtb16(x);
    return k_emu_pack16(k_emu_lo16(a) + k_emu_lo16(e), k_emu_hi16(a) + k_emu_hi16(e));
}

/* SMLAD: acc + lo(a) * lo(b) + hi(a) * hi(b), the sum modulo 2^32. */
static inline int32_t k_emu_smlad(uint32_t a, uint32_t b, int32_t acc)
{
    const int64_t s =
        (int64_t)acc + k_emu_lo16(a) * k_emu_lo16(b) + (int64_t)(k_emu_hi16(a) * k_emu_hi16(b));
    return (int32_t)(uint32_t)(uint64_t)s;
}

/* SMLABB: acc + lo(a) * lo(b), modulo 2^32. */
static inline int32_t k_emu_smlabb(uint32_t a, uint32_t b, int32_t acc)
{
    return (int32_t)(uint32_t)((uint64_t)(int64_t)acc + (uint64_t)(int64_t)(k_emu_lo16(a) * k_emu_lo16(b)));
}

/* SMLATT: acc + hi(a) * hi(b), modulo 2^32. */
static inline int32_t k_emu_smlatt(uint32_t a, uint32_t b, int32_t acc)
{
    return (int32_t)(uint32_t)((uint64_t)(int64_t)acc + (uint64_t)(int64_t)(k_emu_hi16(a) * k_emu_hi16(b)));
}

/* SMLATB: acc + hi(a) * lo(b), modulo 2^32. */
static inline int32_t k_emu_smlatb(uint32_t a, uint32_t b, int32_t acc)
{
    return (int32_t)(uint32_t)((uint64_t)(int64_t)acc + (uint64_t)(int64_t)(k_emu_hi16(a) * k_emu_lo16(b)));
}

/* SMMULR: (a * b + 2^31) >> 32 (arithmetic shift of the 64-bit sum). */
static inline int32_t k_emu_smmulr(int32_t a, int32_t b)
{
    const int64_t s = (int64_t)a * b + ((int64_t)1 << 31);
    return (int32_t)(s >= 0 ? s / ((int64_t)1 << 32) : -((-s + ((int64_t)1 << 32) - 1) / ((int64_t)1 << 32)));
}

/* SMMLAR: (a * b + 2^31 + c * 2^32) >> 32 (arithmetic shift of the 64-bit sum, modulo 2^32). */
static inline int32_t k_emu_smmlar(int32_t a, int32_t b, int32_t c)
{
    return (int32_t)(uint32_t)((uint64_t)k_emu_smmulr(a, b) + (uint64_t)(int64_t)c);
}

/* SSAT #8: v saturated to [-128, 127]. */
static inline int32_t k_emu_ssat8(int32_t v)
{
    return v < -128 ? -128 : (v > 127 ? 127 : v);
}

/* Byte-wise signed maximum: SSUB8 a, b (GE[i] = a[i] >= b[i]) then SEL a, b. */
static inline uint32_t k_emu_max8(uint32_t a, uint32_t b)
{
    uint32_t r = 0;
    int i;
    for (i = 0; i < 32; i += 8) {
        const int8_t x = (int8_t)(uint8_t)(a >> i), y = (int8_t)(uint8_t)(b >> i);
        r |= (uint32_t)(uint8_t)(x >= y ? x : y) << i;
    }
    return r;
}

/* Byte-wise signed minimum: SSUB8 b, a (GE[i] = b[i] >= a[i]) then SEL a, b. */
static inline uint32_t k_emu_min8(uint32_t a, uint32_t b)
{
    uint32_t r = 0;
    int i;
    for (i = 0; i < 32; i += 8) {
        const int8_t x = (int8_t)(uint8_t)(a >> i), y = (int8_t)(uint8_t)(b >> i);
        r |= (uint32_t)(uint8_t)(y >= x ? x : y) << i;
    }
    return r;
}

#endif /* SPLITTER_K_DSP_EMU_H */
