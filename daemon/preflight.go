package daemon

import "fmt"

// Preflight runs the checks the daemon makes at start that need neither a
// socket nor the clock: the config's validation and the key file (its
// owner, mode, syntax and the configured key ids). `gclock daemon
// -print-config` runs it, so that a config it prints is one the daemon
// starts with (it printed configs whose key file the daemon then refused).
func Preflight(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if _, err := cfg.Auth.keyring(); err != nil {
		return fmt.Errorf("auth.key_file: %w", err)
	}
	return nil
}
