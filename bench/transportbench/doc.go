// Package transportbench is the Mocha paper's page-transfer experiment
// (seed 004) on gclock's transport, and nothing else: the benchmark code
// that neither the daemon nor the lab's infrastructure needs.
//
// Loopback runs a page server and a client on 127.0.0.1 through a lossy
// relay, with ACK omission (the reply is the ACK) and with an ACK per
// message, at each loss rate, and keeps the run of median elapsed time;
// Lab runs the same between two lab hosts through the lab's switch (root).
// Serve and Peer run one side each between two real hosts. WriteLoopback
// and WriteLab print the tables of gclock bench-transport and gclock lab
// bench-transport.
package transportbench
