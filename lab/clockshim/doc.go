// Package clockshim puts a program on a lab host's emulated clock: an
// LD_PRELOAD library (clockshim.c, built here with the system's C
// compiler) that shifts every CLOCK_REALTIME read and every kernel packet
// timestamp the program sees by the emulated clock's deviation from the
// machine's, read from a table of the clock's knots (WriteTable). The lab
// runs chronyd under it so that chrony meets the same wandering clocks as
// gclock's daemons, and judges it against the same truth.
package clockshim
