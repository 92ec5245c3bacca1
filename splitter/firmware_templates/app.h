/* Standalone mode: the application side of the generated example (app.c). A product replaces
 * the two functions the chain calls, splitter_app_input (head board) and splitter_app_result
 * (the board that ends the chain); app_init and app_status only print on the console UART.
 * Static file. */
#ifndef SPLITTER_APP_H
#define SPLITTER_APP_H
#include <stdint.h>
#include "splitter.h"

/* Head board: a pointer to the next input (`bytes` bytes: every input tensor of sub-model 0,
 * concatenated), or 0 when none is ready yet (then it is asked again after the next poll). */
const void *splitter_app_input(uint32_t bytes);
/* Board that ends the chain: one result (splitter.h); data valid during the call only. */
void splitter_app_result(const splitter_result_t *result, void *user);
/* Print the board's banner on the console. */
void app_init(void);
/* Print each new error of the status on the console. */
void app_status(const splitter_status_t *status);
#endif
