package sim

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/gclock/gclock/engine"
)

func TestMemPreview(t *testing.T) {
	if os.Getenv("MEMP") == "" {
		t.Skip()
	}
	s, _ := Shipped("scale-tree")
	s.Nodes = 1000
	d, _ := time.ParseDuration(os.Getenv("MEMP"))
	s.Duration = Duration(d)
	var keep []Node
	var ms runtime.MemStats
	res, err := Run(context.Background(), s, Options{NewNode: func(cfg engine.Config, l *slog.Logger) (Node, error) {
		n, err := defaultNewNode(cfg, l)
		keep = append(keep, n)
		return n, err
	}})
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	fmt.Printf("%v: heap in use with engines kept: %d MB (result nodes %d)\n", d, ms.HeapInuse>>20, len(res.Nodes))
	keep = nil
	res = nil
	runtime.GC()
	runtime.ReadMemStats(&ms)
	fmt.Printf("%v: heap in use after: %d MB\n", d, ms.HeapInuse>>20)
}
