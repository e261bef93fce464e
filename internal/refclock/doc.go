// Package refclock feeds chronyd's SOCK reference clock driver, so that
// chronyd can discipline CLOCK_REALTIME from gclock's global time:
//
//	# chrony.conf (deploy/chrony/gclock.conf; the daemon's refclock.every 250ms)
//	refclock SOCK /run/chrony.gclock.sock refid GCLK poll 0 filter 2 precision 1e-7
//
// chronyd creates the Unix datagram socket at that path and reads one
// struct sock_sample per datagram (chrony's refclock_sock.c):
//
//	struct sock_sample {
//	  struct timeval tv;  // the system time (CLOCK_REALTIME) of the sample
//	  double offset;      // true time minus the system time at tv, seconds
//	  int pulse;          // non-zero: a PPS edge (gclock sends 0)
//	  int leap;           // 0 normal, 1 insert, 2 delete a leap second
//	  int _pad;
//	  int magic;          // 0x534f434b ("SOCK")
//	};
//
// in the machine's byte order, with C's sizes: 40 bytes where long is 64
// bits (amd64, arm64, riscv64, ppc64le, s390x), 32 where it is 32 bits.
// chronyd drops, without a word in its log unless built with debugging, a
// datagram of another size or magic; Parse applies the same checks, so
// the tests pin the layout.
package refclock
