/* The floor for a wake-up measurement's CPU time: one SCHED_FIFO thread per listed CPU that sleeps
 * to an absolute deadline every INTERVAL_US and reads the clock, nothing else (no statistics, no
 * main-thread wake-ups). bench/monitor_cost.py builds and runs it beside latlab and cyclictest.
 *
 * With PRIORITY 0 the threads stay SCHED_OTHER: `wakeloop 10000 0 0 1` is a 10 ms waker on CPUs
 * 0 and 1, like cyclictest's main thread (the control run of `monitor_cost.py --waker-us`).
 *
 *     cc -O2 -pthread -o wakeloop wakeloop.c
 *     ./wakeloop INTERVAL_US PRIORITY CPU...
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static long interval_ns;
static int priority;
/* Thread-local: no cache line written on a wake-up is shared between the CPUs. */
static __thread volatile long long sink;

static void *run(void *arg) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET((int)(long)arg, &set);
    struct sched_param sp = {.sched_priority = priority};
    if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) ||
        (priority > 0 && pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp))) {
        fprintf(stderr, "wakeloop: cannot pin to CPU %ld at FIFO %d\n", (long)arg, priority);
        exit(1);
    }
    struct timespec next, now;
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (;;) {
        next.tv_nsec += interval_ns;
        while (next.tv_nsec >= 1000000000L) {
            next.tv_nsec -= 1000000000L;
            next.tv_sec++;
        }
        syscall(SYS_clock_nanosleep, CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
        clock_gettime(CLOCK_MONOTONIC, &now);
        sink = (now.tv_sec - next.tv_sec) * 1000000000LL + now.tv_nsec - next.tv_nsec;
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: wakeloop INTERVAL_US PRIORITY CPU...\n");
        return 2;
    }
    interval_ns = atol(argv[1]) * 1000L;
    priority = atoi(argv[2]);
    if (interval_ns <= 0 || priority < 0 || priority > 99) {
        fprintf(stderr, "wakeloop: interval must be > 0 us and priority 0..99 (0: SCHED_OTHER)\n");
        return 2;
    }
    if (mlockall(MCL_CURRENT | MCL_FUTURE)) {
        perror("wakeloop: mlockall");
        return 1;
    }
    for (int i = 3; i < argc; i++) {
        pthread_t t;
        pthread_create(&t, NULL, run, (void *)(long)atoi(argv[i]));
    }
    for (;;)
        pause();
}
