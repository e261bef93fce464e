package engineconf

import (
	"errors"
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/gclock/gclock/deploy/profiles"
	"github.com/gclock/gclock/internal/conf"
)

// ProfileNames lists the shipped sync profiles (deploy/profiles).
func ProfileNames() []string { return profiles.Names() }

// Profile is the engine's defaults (Default) with the keys of the shipped
// profile name: what a section that says only `profile: NAME` decodes to
// in a daemon config.
func Profile(name string) (Config, error) {
	c := Default()
	err := c.ApplyProfile(name)
	return c, err
}

// ApplyProfile sets the keys that the shipped profile name sets, over c's
// values, and records the name in c.Profile. Every shipped profile sets
// the same keys (TestProfilesSetTheSameKeys), so applying one over another
// leaves nothing of the first. Errors wrap ErrConfig.
func (c *Config) ApplyProfile(name string) error {
	data, err := profiles.Read(name)
	if err != nil {
		return &conf.FieldError{Msg: err.Error()}
	}
	root, err := conf.Parse(data)
	if err != nil {
		return fmt.Errorf("profile %s (deploy/profiles/%[1]s.yaml): %w", name, err)
	}
	p := plain(*c)
	p.Profile = ""
	if root != nil {
		if err := conf.Decode(root, "", &p); err != nil {
			return fmt.Errorf("profile %s (deploy/profiles/%[1]s.yaml): %w", name, err)
		}
	}
	if p.Profile != "" {
		return &conf.FieldError{Msg: fmt.Sprintf("profile %s names another (%q): a profile is settings only", name, p.Profile)}
	}
	p.Profile = name
	*c = Config(p)
	return nil
}

// plain is Config without its UnmarshalConf, for conf.Decode.
type plain Config

// UnmarshalConf decodes a section (conf.Unmarshaler): the profile it
// names first, over c's values, then the keys written beside it over the
// profile's. path is the section's ("sync", "engine").
func (c *Config) UnmarshalConf(n *yaml.Node, path string) error {
	at := func(key string) string {
		if path == "" {
			return key
		}
		return path + "." + key
	}
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value != "profile" || k.ShortTag() == "!!merge" {
				continue
			}
			if v.Kind != yaml.ScalarNode {
				return &conf.FieldError{Field: at("profile"), Line: v.Line, Msg: "want a profile's name"}
			}
			if err := c.ApplyProfile(v.Value); err != nil {
				msg := err.Error()
				if fe, ok := errors.AsType[*conf.FieldError](err); ok && fe.Field == "" {
					msg = fe.Msg
				}
				return &conf.FieldError{Field: at("profile"), Line: v.Line, Msg: msg}
			}
			break
		}
	}
	applied := c.Profile
	if err := conf.Decode(n, path, (*plain)(c)); err != nil {
		return err
	}
	if c.Profile != applied {
		return &conf.FieldError{Field: at("profile"), Line: n.Line,
			Msg: fmt.Sprintf("%q reached the section through a merge (<<) or an alias: write profile: in the section itself", c.Profile)}
	}
	return nil
}
