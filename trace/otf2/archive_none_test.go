//go:build !(otf2 && cgo)

package otf2

import (
	"errors"
	"testing"
)

func TestCreateWithoutLibotf2(t *testing.T) {
	if _, err := Create(t.TempDir(), Options{}); !errors.Is(err, ErrNotBuilt) || Available {
		t.Fatalf("Create = %v (Available %v), want ErrNotBuilt", err, Available)
	}
}
