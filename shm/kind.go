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

func wrapOrClose[T any](reg *Region, wrap func(*Region) (T, error)) (T, error) {
	t, err := wrap(reg)
	if err != nil {
		reg.Close()
	}
	return t, err
}
