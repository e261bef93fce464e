// Package workload drives gclock's transport as a benchmark load, with no
// dependency on the lab, so that the lab's own tests can use it too:
//
//   - RunPageClient runs the page-transfer workload of the Mocha paper
//     (seed 004) from one transport.Endpoint against a transport.PageServer
//     and checks every page;
//   - RunLoopbackPages runs one configuration of the paper's experiment on
//     127.0.0.1, a server and a client through a lossy, duplicating Relay;
//   - MeasureRTT compares the loopback probe round trip measured with
//     user-space and with kernel stamps.
//
// bench/transportbench turns these into the tables of gclock
// bench-transport and gclock lab bench-transport.
package workload
