// Package keyfile reads gclock's key files, the cluster and link keys
// wire.Keyring seals and opens datagrams with, and writes their lines.
//
// A key file holds one key a line, "ID SECRET" (a cluster key) or "ID
// SECRET peer=N" (this node's link key with node N, from gclock keygen
// -links), SECRET 64 or more hex digits (32+ bytes) or "base64:" and the
// standard base64 of 32+ bytes; blank lines and lines starting with # are
// skipped. Read refuses a file others could read or replace:
//
//	keys, err := keyfile.Read("/etc/gclock/cluster.key")
//	kr, err := wire.NewKeyring(keys[0].ID, keys)
//
// The daemon (daemon.AuthConfig's keyring), gclock keygen and measure read
// key files through it, so a file one accepts the others accept.
package keyfile
