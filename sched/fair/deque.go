package fair

// fairDeque is a growable ring-buffer double-ended queue. Its zero value is
// empty and ready to use.
type fairDeque[T any] struct {
	buf  []T // len(buf) is zero or a power of two
	head int
	n    int
}

func (d *fairDeque[T]) len() int { return d.n }

// at returns the i-th element from the front (i < len).
func (d *fairDeque[T]) at(i int) T { return d.buf[(d.head+i)&(len(d.buf)-1)] }

func (d *fairDeque[T]) front() T { return d.buf[d.head] }

func (d *fairDeque[T]) pushBack(v T) {
	if d.n == len(d.buf) {
		d.grow()
	}
	d.buf[(d.head+d.n)&(len(d.buf)-1)] = v
	d.n++
}

// popFront removes and returns the front element; the deque must not be empty.
func (d *fairDeque[T]) popFront() T {
	var zero T
	v := d.buf[d.head]
	d.buf[d.head] = zero
	d.head = (d.head + 1) & (len(d.buf) - 1)
	d.n--
	return v
}

// retain keeps, in order, the elements for which keep returns true.
func (d *fairDeque[T]) retain(keep func(T) bool) {
	var zero T
	mask := len(d.buf) - 1
	w := 0
	for r := 0; r < d.n; r++ {
		v := d.buf[(d.head+r)&mask]
		if keep(v) {
			d.buf[(d.head+w)&mask] = v
			w++
		}
	}
	for i := w; i < d.n; i++ {
		d.buf[(d.head+i)&mask] = zero
	}
	d.n = w
}

func (d *fairDeque[T]) grow() {
	size := 2 * len(d.buf)
	if size == 0 {
		size = 8
	}
	buf := make([]T, size)
	for i := 0; i < d.n; i++ {
		buf[i] = d.at(i)
	}
	d.buf, d.head = buf, 0
}
