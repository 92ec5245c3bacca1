/* config.h of the host build of the firmware runtime (tests/test_runtime_host.py): device "d1",
 * index 1, two links (0: host, 1: device d2), two hosted sub-models (runtime_main.c). Timer
 * ticks are microseconds (timer_fake.c). */
#ifndef SPLITTER_CONFIG_H
#define SPLITTER_CONFIG_H
#include <stdint.h>

#define EMULATOR 1
#define DEVICE_INDEX 1u
#define FIRMWARE_VERSION 3u
#define DEVICE_NAME_LEN 2
#define N_SUBMODELS 2u
#define N_LINKS 2
#define SEND_RETRIES 3
#define MAX_TIMING_RECORDS 4
#define PLAN_TAG 0x2301u /* plan hash 0123456789abcdef */
#define ACK_TIMEOUT_TICKS 100000ull
#define BYTE_TIMEOUT_TICKS 50000ull

extern const uint8_t plan_hash[8];
extern const char device_name[DEVICE_NAME_LEN + 1];
#endif
