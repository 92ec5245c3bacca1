/* model.h of the host build of a segmented device: what segments/firmware.py declares. */
#ifndef MODEL_SEGMENTS_H
#define MODEL_SEGMENTS_H
#include <stdint.h>

#define SEG_EXTFLASH 0
int seg_load(uint32_t k, uint8_t *dst, uint32_t blob_offset, uint32_t n);
void seg_move(unsigned char *a8, uint32_t src, uint32_t n);
#endif
