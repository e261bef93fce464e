package engine

import "container/heap"

// timerHeap orders children by due time, then by id for determinism.
type timerHeap []*child

func (h timerHeap) Len() int { return len(h) }

func (h timerHeap) Less(i, j int) bool {
	if h[i].due != h[j].due {
		return h[i].due < h[j].due
	}
	return h[i].id < h[j].id
}

func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx = i
	h[j].heapIdx = j
}

func (h *timerHeap) Push(x any) {
	c := x.(*child)
	c.heapIdx = len(*h)
	*h = append(*h, c)
}

func (h *timerHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	c.heapIdx = -1
	return c
}

var _ heap.Interface = (*timerHeap)(nil)
