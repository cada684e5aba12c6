/* syswork.c: a program that spends most of its time in the kernel, for
 * tests of kernel-mode samples: round trips of 16 KiB through a pipe and
 * through a loopback TCP connection (whose receive side the kernel runs
 * in a softirq, on the CPU's IRQ stack), from one thread.  No C library:
 * raw system calls and its own _start, so its whole stack (_start ->
 * main -> pump -> through_pipe / through_tcp -> sys) is in this file and
 * is unwound from this file's CFI alone.  Build:
 *   gcc -O2 -static -nostdlib -fno-pie -no-pie -fno-stack-protector
 * (gcc -O2: no frame pointers).  Usage: syswork SECONDS. */

#define NOINLINE __attribute__((noinline, noclone))

#define SYS_read 0
#define SYS_write 1
#define SYS_close 3
#define SYS_pipe 22
#define SYS_socket 41
#define SYS_connect 42
#define SYS_accept 43
#define SYS_bind 49
#define SYS_listen 50
#define SYS_getsockname 51
#define SYS_exit_group 231
#define SYS_clock_gettime 228

#define AF_INET 2
#define SOCK_STREAM 1
#define CLOCK_MONOTONIC 1
#define CHUNK 16384

struct sockaddr_in4 {
	unsigned short family;
	unsigned short port;
	unsigned int addr;
	unsigned char zero[8];
};

struct timespec64 {
	long sec, nsec;
};

static char buf[CHUNK];

/* The only frame that enters the kernel. */
NOINLINE long sys(long nr, long a, long b, long c)
{
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a), "S"(b), "d"(c)
			 : "rcx", "r11", "memory");
	return ret;
}

/* transfer: CHUNK bytes written to out and read back from in. */
static long transfer(int out, int in)
{
	long done = 0, n;

	if (sys(SYS_write, out, (long)buf, CHUNK) != CHUNK)
		return -1;
	while (done < CHUNK) {
		n = sys(SYS_read, in, (long)buf + done, CHUNK - done);
		if (n <= 0)
			return -1;
		done += n;
	}
	return done;
}

/* Each caller uses the result after the call: no tail calls. */
NOINLINE long through_pipe(const int fds[2])
{
	long r = transfer(fds[1], fds[0]);

	return r < 0 ? r : r + 1;
}

NOINLINE long through_tcp(int client, int server)
{
	long r = transfer(client, server);

	return r < 0 ? r : r + 1;
}

static long seconds_now(void)
{
	struct timespec64 t;

	sys(SYS_clock_gettime, CLOCK_MONOTONIC, (long)&t, 0);
	return t.sec;
}

/* tcp_pair: a connected loopback TCP connection; 0, or -1. */
static int tcp_pair(int *client, int *server)
{
	struct sockaddr_in4 a = { AF_INET, 0, 0x0100007f, { 0 } };
	long len = sizeof(a), l;

	l = sys(SYS_socket, AF_INET, SOCK_STREAM, 0);
	*client = (int)sys(SYS_socket, AF_INET, SOCK_STREAM, 0);
	if (l < 0 || *client < 0 || sys(SYS_bind, l, (long)&a, sizeof(a)) ||
	    sys(SYS_listen, l, 1, 0) || sys(SYS_getsockname, l, (long)&a, (long)&len) ||
	    sys(SYS_connect, *client, (long)&a, sizeof(a)))
		return -1;
	*server = (int)sys(SYS_accept, l, 0, 0);
	sys(SYS_close, l, 0, 0);
	return *server < 0 ? -1 : 0;
}

NOINLINE long pump(long seconds, const int fds[2], int client, int server)
{
	long end = seconds_now() + seconds, total = 0, i;

	while (seconds_now() < end) {
		for (i = 0; i < 64; i++) {
			long p = through_pipe(fds), t = through_tcp(client, server);
			if (p < 0 || t < 0)
				return -1;
			total += p + t;
		}
	}
	return total;
}

NOINLINE int main(int argc, char **argv)
{
	long seconds = 0;
	const char *s = argc > 1 ? argv[1] : "10";
	int fds[2], client, server;

	while (*s >= '0' && *s <= '9')
		seconds = seconds * 10 + (*s++ - '0');

	if (sys(SYS_pipe, (long)fds, 0, 0) || tcp_pair(&client, &server))
		return 2;
	return pump(seconds, fds, client, server) < 0 ? 1 : 0;
}

/* _start: the outermost frame (its return address is undefined in the
 * CFI, as in the C library's). */
__asm__(".globl _start\n"
	".type _start, @function\n"
	"_start:\n"
	".cfi_startproc\n"
	".cfi_undefined rip\n"
	"xorl %ebp, %ebp\n"
	"movq %rsp, %rdi\n"
	"andq $-16, %rsp\n"
	"call start_c\n"
	"hlt\n"
	".cfi_endproc\n"
	".size _start, .-_start\n");

/* start_c: main with the arguments at the initial stack pointer. */
NOINLINE void start_c(long *sp)
{
	sys(SYS_exit_group, main((int)sp[0], (char **)(sp + 1)), 0, 0);
}
