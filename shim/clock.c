/*
 * libenvcraft_clock.so: a frozen wall clock for every dynamically linked program in a sandbox.
 *
 * Loaded with LD_PRELOAD. When ENVCRAFT_NOW holds Unix seconds (`1700000000` or
 * `1700000000.25`), the wall clock reads that instant, and keeps reading it for the whole life
 * of the process: clock_gettime and timespec_get for the realtime clocks, gettimeofday and
 * time. Every other clock (MONOTONIC, BOOTTIME, the CPU-time clocks...) is the kernel's, so
 * sleeps, timeouts and elapsed-time measurements still work. When ENVCRAFT_NOW is absent or
 * malformed, every call passes through to the kernel unchanged.
 *
 * The grammar of ENVCRAFT_NOW: one or more decimal digits, optionally `.` and one or more
 * decimal digits (the first nine are nanoseconds, the rest are ignored); no sign, no spaces,
 * no exponent; at most 253402300799 (9999-12-31T23:59:59Z). Anything else is malformed.
 *
 * Pass-through is a raw system call, never dlsym(RTLD_NEXT): the shim needs nothing but libc's
 * syscall(), strncmp() and memset() (no libdl), and cannot recurse into itself. The price: a
 * pass-through read (CLOCK_MONOTONIC included) is a real system call, about 200 ns instead of
 * the vDSO's 25 ns.
 *
 * Thread and signal safety: the variable is read once (in the constructor, or by the first
 * call if another library's constructor asks for the time before ours has run) from `environ`
 * without allocating or locking; the result is published with release/acquire atomics and is
 * read-only after that. Every interposed function only loads atomics, stores into the caller's
 * struct and may make one system call, so each is async-signal-safe, as the functions it
 * replaces.
 *
 * The interposed functions are defined under C names of their own and given the libc symbol
 * names with asm labels, so that the attributes glibc's headers put on the declarations (the
 * `nonnull` on gettimeofday's first argument, which the kernel accepts as NULL) cannot let the
 * compiler delete the NULL checks below.
 *
 * Built by build.rs (`cc -shared -fPIC -O2 -Wall -Wextra`); 64-bit time_t only (see below).
 */

#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/*
 * On a 32-bit time_t ABI, programs built with _TIME_BITS=64 call __clock_gettime64,
 * __gettimeofday64, __time64 and __timespec_get64, which this file does not define: refuse to
 * build there rather than ship a shim that misses them.
 */
#if defined(__TIMESIZE) && __TIMESIZE != 64
#error "libenvcraft_clock supports 64-bit time_t ABIs only (x86_64, aarch64, riscv64...)"
#endif
_Static_assert(sizeof(time_t) == 8, "libenvcraft_clock supports 64-bit time_t ABIs only");

#define ENV_NAME "ENVCRAFT_NOW="
/* 9999-12-31T23:59:59Z: far enough for any task, small enough that nothing overflows. */
#define LATEST_SECONDS 253402300799LL

enum clock_state { STATE_UNREAD = 0, STATE_REAL = 1, STATE_FROZEN = 2 };

static int state = STATE_UNREAD;
static int64_t frozen_sec;
static int64_t frozen_nsec;

/* Parses the grammar above; 1 and the instant on success, 0 when malformed. */
static int parse_now(const char *s, int64_t *sec, int64_t *nsec)
{
    int64_t whole = 0;
    int64_t frac = 0;
    int digits = 0;
    int frac_digits = 0;

    for (; *s >= '0' && *s <= '9'; s++, digits++) {
        whole = whole * 10 + (*s - '0');
        if (whole > LATEST_SECONDS)
            return 0;
    }
    if (digits == 0)
        return 0;
    if (*s == '.') {
        for (s++; *s >= '0' && *s <= '9'; s++, frac_digits++) {
            if (frac_digits < 9)
                frac = frac * 10 + (*s - '0');
        }
        if (frac_digits == 0)
            return 0;
        for (int i = frac_digits; i < 9; i++)
            frac *= 10;
    }
    if (*s != '\0')
        return 0;
    *sec = whole;
    *nsec = frac;
    return 1;
}

/*
 * Reads ENVCRAFT_NOW from the initial environment (the first entry, as getenv would) and
 * publishes the result. Idempotent: two threads, or a signal handler and the code it
 * interrupted, may both get here and store the same values.
 */
static void read_env(void)
{
    int64_t sec = 0;
    int64_t nsec = 0;
    int next = STATE_REAL;

    if (environ == NULL)
        return; /* too early to know (an IFUNC resolver): pass through, decide later */
    for (char **entry = environ; *entry != NULL; entry++) {
        if (strncmp(*entry, ENV_NAME, sizeof(ENV_NAME) - 1) == 0) {
            if (parse_now(*entry + sizeof(ENV_NAME) - 1, &sec, &nsec))
                next = STATE_FROZEN;
            break;
        }
    }
    __atomic_store_n(&frozen_sec, sec, __ATOMIC_RELAXED);
    __atomic_store_n(&frozen_nsec, nsec, __ATOMIC_RELAXED);
    __atomic_store_n(&state, next, __ATOMIC_RELEASE);
}

__attribute__((constructor)) static void envcraft_clock_init(void)
{
    read_env();
}

/* 1 and the frozen instant in *ts when the wall clock is frozen, else 0. */
static int frozen_now(struct timespec *ts)
{
    int current = __atomic_load_n(&state, __ATOMIC_ACQUIRE);

    if (current == STATE_UNREAD) {
        read_env();
        current = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
    }
    if (current != STATE_FROZEN)
        return 0;
    ts->tv_sec = (time_t)__atomic_load_n(&frozen_sec, __ATOMIC_RELAXED);
    ts->tv_nsec = (long)__atomic_load_n(&frozen_nsec, __ATOMIC_RELAXED);
    return 1;
}

static int is_wall_clock(clockid_t clk)
{
    switch (clk) {
    case CLOCK_REALTIME:
#ifdef CLOCK_REALTIME_COARSE
    case CLOCK_REALTIME_COARSE:
#endif
#ifdef CLOCK_REALTIME_ALARM
    case CLOCK_REALTIME_ALARM:
#endif
#ifdef CLOCK_TAI
    case CLOCK_TAI:
#endif
        return 1;
    default:
        return 0;
    }
}

static int kernel_clock_gettime(clockid_t clk, struct timespec *ts)
{
    return (int)syscall(SYS_clock_gettime, clk, ts);
}

/* The wall clock: frozen, or the kernel's. 0 on success, -1 and errno on failure. */
static int wall_clock_now(struct timespec *ts)
{
    if (frozen_now(ts))
        return 0;
    return kernel_clock_gettime(CLOCK_REALTIME, ts);
}

/* The interposed symbols (asm labels: see the top of the file for why). */
int envcraft_clock_gettime(clockid_t clk, struct timespec *ts) __asm__("clock_gettime");
int envcraft_gettimeofday(struct timeval *tv, void *tz) __asm__("gettimeofday");
time_t envcraft_time(time_t *out) __asm__("time");
int envcraft_timespec_get(struct timespec *ts, int base) __asm__("timespec_get");

int envcraft_clock_gettime(clockid_t clk, struct timespec *ts)
{
    /* NULL goes to the kernel, which answers EFAULT. */
    if (ts != NULL && is_wall_clock(clk) && frozen_now(ts))
        return 0;
    return kernel_clock_gettime(clk, ts);
}

/* As glibc since 2.31: a non-NULL tz is zeroed (the kernel's timezone is not reported). */
int envcraft_gettimeofday(struct timeval *tv, void *tz)
{
    struct timespec now;

    if (tz != NULL)
        memset(tz, 0, sizeof(struct timezone));
    if (tv == NULL)
        return 0;
    if (wall_clock_now(&now) != 0)
        return -1;
    tv->tv_sec = now.tv_sec;
    tv->tv_usec = (suseconds_t)(now.tv_nsec / 1000);
    return 0;
}

time_t envcraft_time(time_t *out)
{
    struct timespec now;

    if (wall_clock_now(&now) != 0)
        return (time_t)-1;
    if (out != NULL)
        *out = now.tv_sec;
    return now.tv_sec;
}

/* C11: returns base on success, 0 on failure or for a base this libc does not know. */
int envcraft_timespec_get(struct timespec *ts, int base)
{
    clockid_t clk;

    if (ts == NULL)
        return 0;
    switch (base) {
    case TIME_UTC:
        return wall_clock_now(ts) == 0 ? base : 0;
#ifdef TIME_MONOTONIC
    case TIME_MONOTONIC:
        clk = CLOCK_MONOTONIC;
        break;
#endif
#ifdef TIME_ACTIVE
    case TIME_ACTIVE:
        clk = CLOCK_PROCESS_CPUTIME_ID;
        break;
#endif
#ifdef TIME_THREAD_ACTIVE
    case TIME_THREAD_ACTIVE:
        clk = CLOCK_THREAD_CPUTIME_ID;
        break;
#endif
    default:
        return 0;
    }
    return kernel_clock_gettime(clk, ts) == 0 ? base : 0;
}
