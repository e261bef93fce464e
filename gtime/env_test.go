package gtime

import "testing"

func TestExpandPath(t *testing.T) {
	for _, tt := range []struct{ pattern, id, want string }{
		{"/dev/shm/gclock-42-%n", "3", "/dev/shm/gclock-42-3"},
		{"/dev/shm/gclock-%n/%n", "0", "/dev/shm/gclock-0/0"},
		{"/dev/shm/gclock-%n", "", "/dev/shm/gclock-%n"},
		{"/run/gclock/page", "7", "/run/gclock/page"},
	} {
		if got := ExpandPath(tt.pattern, tt.id); got != tt.want {
			t.Errorf("ExpandPath(%q, %q) = %q, want %q", tt.pattern, tt.id, got, tt.want)
		}
	}
	t.Setenv("GCLOCK_PAGE", "/tmp/p-%n")
	t.Setenv("SLURM_NODEID", "5")
	if got := PageFromEnv(); got != "/tmp/p-5" {
		t.Errorf("PageFromEnv() = %q, want /tmp/p-5", got)
	}
}
