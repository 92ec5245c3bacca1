/* config.h of the host build of a segmented device (tests/test_segments_host.py): device "s1",
 * index 0, one link (the host), one sub-model running two LO-SC segments (seg_main.c). Timer
 * ticks are microseconds (../host_c/timer_fake.c). */
#ifndef SPLITTER_CONFIG_H
#define SPLITTER_CONFIG_H
#include <stdint.h>

#define EMULATOR 1
#define DEVICE_INDEX 0u
#define FIRMWARE_VERSION 2u
#define DEVICE_NAME_LEN 2
#define N_SUBMODELS 1u
#define N_LINKS 1
#define SEND_RETRIES 3
#define MAX_TIMING_RECORDS 4
#define PLAN_TAG 0x2301u /* plan hash 0123456789abcdef */
#define ACK_TIMEOUT_TICKS 100000ull
#define BYTE_TIMEOUT_TICKS 50000ull
#define CORE_CLOCK_HZ 1000000u /* ticks are microseconds: SEG_WAIT_TICKS = 5 s */

extern const uint8_t plan_hash[8];
extern const char device_name[DEVICE_NAME_LEN + 1];
#endif
