/* probe: what a program under the clock shim sees. Prints, one per line,
 * "name interposed_ns kernel_ns raw_ns": the realtime it reads through the
 * C library (the shim's), the same instant read by a raw system call (the
 * machine's), and CLOCK_MONOTONIC_RAW; packet timestamps are compared with
 * the machine's realtime just after the receive. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <linux/net_tstamp.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int64_t sys_ns(clockid_t id)
{
	struct timespec ts;
	syscall(SYS_clock_gettime, id, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void line(const char *name, int64_t got)
{
	printf("%s %lld %lld %lld\n", name, (long long)got, (long long)sys_ns(CLOCK_REALTIME), (long long)sys_ns(CLOCK_MONOTONIC_RAW));
}

static int64_t cmsg_ns(struct msghdr *m, int type)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == type) {
			if (type == SO_TIMESTAMP) {
				struct timeval tv;
				memcpy(&tv, CMSG_DATA(c), sizeof tv);
				return (int64_t)tv.tv_sec * 1000000000 + tv.tv_usec * 1000;
			}
			struct timespec ts;
			memcpy(&ts, CMSG_DATA(c), sizeof ts);
			return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
		}
	return -1;
}

static void packet(const char *name, int opt, int type, int mm)
{
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof a;
	bind(s, (struct sockaddr *)&a, sizeof a);
	getsockname(s, (struct sockaddr *)&a, &al);
	int on = 1;
	if (opt == SO_TIMESTAMPING)
		on = SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE;
	setsockopt(s, SOL_SOCKET, opt, &on, sizeof on);
	sendto(s, "x", 1, 0, (struct sockaddr *)&a, sizeof a);
	char buf[8], ctl[512];
	struct iovec iov = {buf, sizeof buf};
	struct mmsghdr mh;
	memset(&mh, 0, sizeof mh);
	mh.msg_hdr.msg_iov = &iov;
	mh.msg_hdr.msg_iovlen = 1;
	mh.msg_hdr.msg_control = ctl;
	mh.msg_hdr.msg_controllen = sizeof ctl;
	if (mm)
		recvmmsg(s, &mh, 1, 0, NULL);
	else
		recvmsg(s, &mh.msg_hdr, 0);
	line(name, cmsg_ns(&mh.msg_hdr, type));
	close(s);
}

int main(void)
{
	/* The kernel turns its receive timestamps on a moment after the first
	 * socket asks (and off after the last one closes): one socket keeps
	 * them on for the whole probe. */
	int keep = socket(AF_INET, SOCK_DGRAM, 0), on = 1;
	setsockopt(keep, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on);
	usleep(50000);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	line("clock_gettime", (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec);
	struct timeval tv;
	gettimeofday(&tv, NULL);
	line("gettimeofday", (int64_t)tv.tv_sec * 1000000000 + tv.tv_usec * 1000);
	line("time", (int64_t)time(NULL) * 1000000000);
	packet("SO_TIMESTAMP", SO_TIMESTAMP, SO_TIMESTAMP, 0);
	packet("SO_TIMESTAMPNS", SO_TIMESTAMPNS, SO_TIMESTAMPNS, 0);
	packet("SO_TIMESTAMPING", SO_TIMESTAMPING, SO_TIMESTAMPING, 0);
	packet("SO_TIMESTAMPING/recvmmsg", SO_TIMESTAMPING, SO_TIMESTAMPING, 1);
	close(keep);
	return 0;
}
