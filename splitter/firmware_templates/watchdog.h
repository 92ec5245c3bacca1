/* Independent watchdog (IWDG), on when the plan was compiled with --watchdog-ms (config.h
 * WATCHDOG_MS; splitter/codegen/watchdog.py says how long it may go unkicked). */
#ifndef SPLITTER_WATCHDOG_H
#define SPLITTER_WATCHDOG_H

/* Start the IWDG with config.h's prescaler and reload (board_init(), after the clock start-up;
 * a library user calls it once its own clock set-up is done). Once started it runs until reset. */
void watchdog_start(void);
/* Reload the counter: the runtime's loop and its byte waits call it. */
void watchdog_kick(void);
#endif
