package gtime

import (
	"errors"
	"fmt"
	"testing"
)

// TestReadPatiently: a busy page is read again for the same
// instant, counts every busy read, and gives up only after its retries;
// other errors end at once.
func TestReadPatiently(t *testing.T) {
	other := errors.New("not a page")
	tests := []struct {
		name     string
		busy     int   // reads that fail with ErrBusy before one succeeds
		fail     error // returned instead of success after the busy reads
		retries  int
		wantBusy int
		wantErr  error
	}{
		{"clean", 0, nil, 20, 0, nil},
		{"busy twice", 2, nil, 20, 2, nil},
		{"busy up to the last retry", 20, nil, 20, 20, nil},
		{"busy beyond", 25, nil, 20, 21, ErrBusy},
		{"other error", 0, other, 20, 0, other},
		{"busy then other error", 3, other, 20, 3, other},
	}
	for _, tc := range tests {
		calls := 0
		at := func(r int64) (Time, error) {
			calls++
			if r != 42 {
				t.Fatalf("%s: read instant %d, want 42", tc.name, r)
			}
			if calls <= tc.busy {
				return Time{}, fmt.Errorf("page-h1: %w", ErrBusy)
			}
			if tc.fail != nil {
				return Time{}, tc.fail
			}
			return Time{Est: 7, Status: StatusSynced}, nil
		}
		got, busy, err := ReadPatiently(at, 42, tc.retries)
		if busy != tc.wantBusy || !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
			t.Errorf("%s: busy %d, err %v; want %d, %v", tc.name, busy, err, tc.wantBusy, tc.wantErr)
		}
		if err == nil && got.Est != 7 {
			t.Errorf("%s: got %+v", tc.name, got)
		}
	}
}
