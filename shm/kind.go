package shm

// The three ways a typed structure comes to its file (create, open, open
// or create) are the same for every kind: map the region, then wrap it in
// the kind's type. wrap validates the kind's area and, when it fails, the
// region is closed here so no caller leaks a mapping.

// CreateAs creates the file for spec and wraps the region.
func CreateAs[T any](path string, spec Spec, wrap func(*Region) (T, error), opts ...Option) (T, error) {
	reg, err := Create(path, spec, opts...)
	if err != nil {
		var zero T
		return zero, err
	}
	return wrapOrClose(reg, wrap)
}

// OpenAs opens an existing file of spec's kind and wraps the region. (The
// geometry of spec is not used: an existing file says its own.)
func OpenAs[T any](path string, spec Spec, wrap func(*Region) (T, error), opts ...Option) (T, error) {
	reg, err := Open(path, spec.Kind, opts...)
	if err != nil {
		var zero T
		return zero, err
	}
	return wrapOrClose(reg, wrap)
}

// OpenOrCreateAs opens the file at path, or creates it for spec, and wraps
// the region; created reports which.
func OpenOrCreateAs[T any](path string, spec Spec, wrap func(*Region) (T, error), opts ...Option) (t T, created bool, err error) {
	reg, created, err := OpenOrCreate(path, spec, opts...)
	if err != nil {
		return t, false, err
	}
	t, err = wrapOrClose(reg, wrap)
	return t, created, err
}

// wrapOrClose runs wrap under the region's Guard: a kind's attach touches
// its area (the participant table, counters), and a file truncated or
// holed under it is then an error naming the file, not a crash. A handle
// whose attach faulted is not returned; whatever it wrote to its entry
// before the fault stays, as on a crash (the file is unusable anyway).
func wrapOrClose[T any](reg *Region, wrap func(*Region) (T, error)) (T, error) {
	var t T
	err := reg.Guard("open", func() (err error) {
		t, err = wrap(reg)
		return err
	})
	if err != nil {
		reg.Close()
		var zero T
		return zero, err
	}
	return t, nil
}
