package shm

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/shmkit/shmkit/layout"
)

// DefaultDir is where bare names (no slash) are created and opened.
const DefaultDir = "/dev/shm"

// DefaultReadyTimeout bounds how long Open waits for a file that exists but
// is not yet initialised.
const DefaultReadyTimeout = 2 * time.Second

// DefaultAttachTimeout bounds how long attaching to a file's participant
// table waits on other processes' passing states (see WithAttachTimeout).
const DefaultAttachTimeout = 10 * time.Second

// Resolve maps a bare name ("orders") to DefaultDir ("/dev/shm/orders");
// anything containing a slash is used as given.
func Resolve(name string) string {
	if strings.ContainsRune(name, '/') {
		return name
	}
	return filepath.Join(DefaultDir, name)
}

// Spec says what kind of file to create and its geometry.
type Spec struct {
	Kind     layout.Kind
	Geometry layout.Geometry
}

// Option adjusts Create and Open.
type Option func(*options)

type options struct {
	mode         os.FileMode
	group        int // group of a created file; -1 keeps the creator's
	anyOwner     bool
	owner        int
	readOnly     bool
	readyTimeout time.Duration
	attachWait   time.Duration
	init         func(r *Region) error
}

func buildOptions(opts []Option) options {
	o := options{mode: 0o600, group: -1, owner: os.Geteuid(), readyTimeout: DefaultReadyTimeout, attachWait: DefaultAttachTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithMode sets the permission bits of a created file (default 0600) and
// the most that Open accepts on an existing one: a file granting more than
// this is refused with ErrPermissive.
func WithMode(m os.FileMode) Option { return func(o *options) { o.mode = m.Perm() } }

// WithGroup makes Create give the new file group gid (before the file
// appears under its name: no process ever sees it with the creator's
// group). With WithMode(0o640) the members of that group may map it
// read-only (a monitoring user, see WithOwner). A gid the creator is not a
// member of fails as fchown(2) does (EPERM), unless it is privileged.
// Open ignores it.
func WithGroup(gid int) Option { return func(o *options) { o.group = gid } }

// WithOwner lets Open accept a file owned by uid instead of the effective uid;
// uid < 0 accepts any owner.
func WithOwner(uid int) Option {
	return func(o *options) {
		if uid < 0 {
			o.anyOwner = true
		}
		o.owner = uid
	}
}

// ReadOnly maps the file read-only (PROT_READ): for inspectors, which then
// cannot disturb the processes using it.
func ReadOnly() Option { return func(o *options) { o.readOnly = true } }

// WithReadyTimeout bounds how long Open waits for an uninitialised file.
func WithReadyTimeout(d time.Duration) Option { return func(o *options) { o.readyTimeout = d } }

// WithAttachTimeout bounds how long attaching to the file's participant
// table (the kinds that have one: ring, deque, hash map) waits on other
// processes' passing states when no entry is free to take: an entry being
// claimed or released right now, holders that released their lock but
// still run (exiting), a live process repairing the file. Then the open
// fails with the kind's "table full" error naming what it waited on. 0
// does not wait. The default is DefaultAttachTimeout.
func WithAttachTimeout(d time.Duration) Option { return func(o *options) { o.attachWait = max(d, 0) } }

// WithInit runs fn on a newly created region after its header is written
// and before it is published as ready, to initialise the kind's area.
func WithInit(fn func(r *Region) error) Option { return func(o *options) { o.init = fn } }

// Region is one mapped shmkit file.
type Region struct {
	path     string
	fd       int
	mem      []byte // exactly what unix.Mmap returned: Munmap needs this slice
	hdr      layout.Header
	readOnly bool
	closed   atomic.Bool

	attachWait time.Duration // WithAttachTimeout

	locksMu sync.Mutex
	locks   map[uint64]uint64 // entry locks this region's open file description holds: offset -> length
}

// Path returns the file's path.
func (r *Region) Path() string { return r.path }

// Header returns the header decoded when the region was opened or created.
func (r *Region) Header() layout.Header { return r.hdr }

// Bytes returns the whole mapping. It stays valid until Close.
func (r *Region) Bytes() []byte { return r.mem }

// Body returns the kind's area: everything after the common header.
func (r *Region) Body() []byte { return r.mem[r.hdr.HeaderSize:] }

// AttachTimeout is how long attaching to the file's participant table may
// wait on other processes (WithAttachTimeout).
func (r *Region) AttachTimeout() time.Duration { return r.attachWait }

// ReadOnly reports whether the mapping is read-only.
func (r *Region) ReadOnly() bool { return r.readOnly }

// Sync flushes the mapping to its file (msync). On tmpfs it is a no-op in
// effect; on a disk-backed path it is what makes the queue durable.
func (r *Region) Sync() error {
	if r.closed.Load() {
		return pathErr("sync", r.path, ErrClosed)
	}
	if err := unix.Msync(r.mem, unix.MS_SYNC); err != nil {
		return pathErr("sync", r.path, err)
	}
	return nil
}

// Close unmaps the file and closes its descriptor. Views made from the
// region must not be used afterwards.
func (r *Region) Close() error {
	if !r.closed.CompareAndSwap(false, true) {
		return nil
	}
	err := unix.Munmap(r.mem)
	if cerr := unix.Close(r.fd); err == nil {
		err = cerr
	}
	r.mem = nil
	if err != nil {
		return pathErr("close", r.path, err)
	}
	return nil
}

// Uint64 returns an atomic view of the 8 bytes at off. The address is
// checked for range and 8-byte alignment once, here.
func (r *Region) Uint64(off uint64) (*atomic.Uint64, error) {
	p, err := r.word(off, 8)
	return (*atomic.Uint64)(p), err
}

// Uint32 returns an atomic view of the 4 bytes at off (4-byte aligned).
func (r *Region) Uint32(off uint64) (*atomic.Uint32, error) {
	p, err := r.word(off, 4)
	return (*atomic.Uint32)(p), err
}

func (r *Region) word(off, size uint64) (unsafe.Pointer, error) {
	if off > uint64(len(r.mem)) || uint64(len(r.mem))-off < size {
		return nil, pathErr("view", r.path, fmt.Errorf("%w: %d+%d beyond %d bytes", ErrBadOffset, off, size, len(r.mem)))
	}
	p := unsafe.Pointer(&r.mem[off])
	if uintptr(p)%uintptr(size) != 0 {
		return nil, pathErr("view", r.path, fmt.Errorf("%w: %d is not %d-byte aligned", ErrBadOffset, off, size))
	}
	return p, nil
}

// ready is the header's ready word.
func (r *Region) ready() *atomic.Uint32 {
	return (*atomic.Uint32)(unsafe.Pointer(&r.mem[layout.OffReady]))
}

// Generation is the header's generation word, bumped by structural repairs.
func (r *Region) Generation() *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&r.mem[layout.OffGeneration]))
}

// Create makes a new file at path (see Resolve) holding spec, reserves its
// blocks, writes the header, runs the WithInit function and publishes the
// file as ready. It fails with ErrExist if path exists.
//
// The file is built under a temporary name in the same directory and moved
// into place with renameat2(RENAME_NOREPLACE) only once it is ready, so no
// process ever opens a half-initialised file by its real name, and two
// creators racing for one path cannot both succeed. A creator killed midway
// leaves only its temporary file (".NAME.shmkit-tmp-PID-RANDOM").
func Create(path string, spec Spec, opts ...Option) (*Region, error) {
	path = Resolve(path)
	o := buildOptions(opts)
	if o.readOnly {
		return nil, pathErr("create", path, errors.New("shm: cannot create read-only"))
	}
	created := time.Now().UnixNano()
	self := Self()
	creator := layout.Creator{PID: uint32(self.PID), StartTicks: self.Start}
	if id, err := BootID(); err == nil {
		creator.BootID = parseBootID(id)
	}
	hdr, err := layout.NewHeader(spec.Kind, spec.Geometry, created, creator)
	if err != nil {
		return nil, pathErr("create", path, err)
	}
	tmp, err := tempName(path)
	if err != nil {
		return nil, pathErr("create", path, err)
	}
	fd, err := unix.Open(tmp, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(o.mode))
	if err != nil {
		return nil, pathErr("create", path, openErr(err))
	}
	r := &Region{path: path, fd: fd, hdr: hdr, attachWait: o.attachWait}
	fail := func(err error) (*Region, error) {
		if r.mem != nil {
			_ = unix.Munmap(r.mem)
		}
		_ = unix.Close(fd)
		_ = unix.Unlink(tmp)
		return nil, pathErr("create", path, err)
	}
	// The group first, then the mode: the file never grants the
	// creator's group what was meant for another.
	if o.group >= 0 {
		if err := unix.Fchown(fd, -1, o.group); err != nil {
			return fail(fmt.Errorf("give the file group %d: %w", o.group, err))
		}
	}
	// The umask may have cleared bits the caller asked for; set them exactly.
	if err := unix.Fchmod(fd, uint32(o.mode)); err != nil {
		return fail(err)
	}
	if err := reserve(fd, int64(hdr.FileSize)); err != nil {
		return fail(err)
	}
	mem, err := unix.Mmap(fd, 0, int(hdr.FileSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fail(err)
	}
	r.mem = mem
	if err := r.hdr.Encode(mem); err != nil {
		return fail(err)
	}
	if o.init != nil {
		if err := o.init(r); err != nil {
			return fail(err)
		}
	}
	// Publish: every initialising store happens before this release store.
	r.ready().Store(layout.ReadyValue)
	r.hdr.Ready = layout.ReadyValue
	if err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, path, unix.RENAME_NOREPLACE); err != nil {
		switch {
		case errors.Is(err, unix.EEXIST):
			return fail(ErrExist)
		case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS):
			return fail(fmt.Errorf("%w: renameat2(RENAME_NOREPLACE): %v", ErrUnsupported, err))
		}
		return fail(err)
	}
	// Anyone who waited on an in-place ready word (files made by other
	// tools) is woken; with nobody waiting this costs one syscall per create.
	_, _ = FutexWake(r.ready(), -1)
	return r, nil
}

// reserve sizes the file and allocates its blocks now, so that a full tmpfs
// fails here with ErrNoSpace instead of killing a process with SIGBUS later.
func reserve(fd int, size int64) error {
	err := unix.Fallocate(fd, 0, 0, size)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT):
		return fmt.Errorf("%w: %d bytes: %v", ErrNoSpace, size, err)
	case errors.Is(err, unix.EOPNOTSUPP):
		// Filesystems without fallocate get a sparse file; say so rather
		// than pretend. (tmpfs, ext4, xfs and btrfs all support it.)
		if err := unix.Ftruncate(fd, size); err != nil {
			return err
		}
		return nil
	}
	return err
}

// tempMarker is in the name of every file Create builds (tempName).
const tempMarker = ".shmkit-tmp-"

// IsTempName reports whether the base name of path is one Create gives a
// file it is still building (".NAME.shmkit-tmp-PID-RANDOM"): not yet a
// file of anyone's, or the leftover of a creator killed mid-way. Tools
// that list a directory skip them.
func IsTempName(path string) bool {
	base := filepath.Base(path)
	return strings.HasPrefix(base, ".") && strings.Contains(base, tempMarker)
}

func tempName(path string) (string, error) {
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", err
	}
	dir, base := filepath.Split(path)
	return filepath.Join(dir, fmt.Sprintf(".%s%s%d-%s", base, tempMarker, os.Getpid(), hex.EncodeToString(rnd[:]))), nil
}

// parseBootID turns "6f1c...-..." into 16 bytes; malformed input gives zeros.
func parseBootID(s string) (id [16]byte) {
	b, err := hex.DecodeString(strings.ReplaceAll(s, "-", ""))
	if err == nil && len(b) == 16 {
		copy(id[:], b)
	}
	return id
}

// Open maps an existing shmkit file of the given kind. It refuses anything
// that is not a plain regular file owned by us with one link and a mode no
// wider than allowed, whose header is valid and whose size is exactly what
// its header declares. A file that exists but is not yet ready is waited for
// up to the ready timeout, then refused with ErrNotReady.
func Open(path string, kind layout.Kind, opts ...Option) (*Region, error) {
	r, err := OpenAny(path, opts...)
	if err != nil {
		return nil, err
	}
	if err := r.hdr.Expect(kind); err != nil {
		r.Close()
		return nil, pathErr("open", r.path, err)
	}
	return r, nil
}

// openFile opens path for OpenAny and ReadHeader: the hostile-directory
// checks on the descriptor, and a wait (bounded by the ready timeout) for
// a file at least a header long and no longer than any shmkit file. On
// error fd is closed and err is not yet tied to the path.
func openFile(path string, o *options) (fd int, st unix.Stat_t, deadline time.Time, err error) {
	flags := unix.O_RDWR
	if o.readOnly {
		flags = unix.O_RDONLY
	}
	// O_NONBLOCK: opening a FIFO planted at the path must not hang us.
	fd, err = unix.Open(path, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return -1, st, deadline, openErr(err)
	}
	fail := func(err error) (int, unix.Stat_t, time.Time, error) {
		_ = unix.Close(fd)
		return -1, st, deadline, err
	}
	deadline = time.Now().Add(o.readyTimeout)
	for {
		if err := unix.Fstat(fd, &st); err != nil {
			return fail(err)
		}
		// The checks in the order that is safe and says the most: what
		// may be read at all (a regular file: nothing else is read; one
		// owner we trust to read; one link, so that the bytes are not
		// another file's, hard-linked here to make us print them), then
		// what the file is (a stray text file is "not a shmkit file",
		// whatever its mode), and last whether we may use it (the mode:
		// a shmkit file others may read or write is refused before
		// anything trusts its header). Reading a few bytes of a regular
		// file of ours trusts nothing of it.
		if err := checkReadable(&st, o); err != nil {
			return fail(err)
		}
		// A file that is not a start of a shmkit file is not one being
		// created: say so now. Zeros may be a creator's that has sized
		// the file but not written it.
		if err := notShmkit(fd, st.Size); err != nil {
			return fail(err)
		}
		if err := checkMode(&st, o); err != nil {
			return fail(err)
		}
		if st.Size >= layout.HeaderSize {
			break
		}
		// A creator writing in place (not shmkit's Create) may not have
		// sized the file yet. Rare, bounded: a short sleep is fine here.
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("%w: %d bytes, a header needs %d", ErrTruncated, st.Size, layout.HeaderSize))
		}
		time.Sleep(time.Millisecond)
	}
	if st.Size > layout.MaxFileSize {
		return fail(fmt.Errorf("%w: %d bytes is larger than any shmkit file", ErrSizeMismatch, st.Size))
	}
	return fd, st, deadline, nil
}

// checkSize is the last check of an open: the header's declared size
// against the file's.
func checkSize(hdr *layout.Header, size int64) error {
	if err := hdr.CheckFileSize(size); err != nil {
		if uint64(size) < hdr.FileSize {
			return fmt.Errorf("%w: %w", ErrTruncated, err)
		}
		return fmt.Errorf("%w: %w", ErrSizeMismatch, err)
	}
	return nil
}

// ReadHeader reads and validates the header of the shmkit file at path
// under Open's checks (owner, mode, links, size against the header),
// through pread instead of a mapping: nothing it does can fault, and a
// file with holes is read (holes read as zeros, and a read allocates
// nothing) where a read-only Open refuses it. For tools that look at a
// file's kind before choosing how to open it. A file not yet ready is
// waited for up to the ready timeout, as Open waits.
func ReadHeader(path string, opts ...Option) (layout.Header, error) {
	path = Resolve(path)
	o := buildOptions(append(opts, ReadOnly()))
	fd, st, deadline, err := openFile(path, &o)
	if err != nil {
		return layout.Header{}, pathErr("open", path, err)
	}
	defer unix.Close(fd)
	fail := func(err error) (layout.Header, error) { return layout.Header{}, pathErr("open", path, err) }
	buf := make([]byte, layout.HeaderSize)
	var hdr layout.Header
	for {
		n, err := unix.Pread(fd, buf, 0)
		if err != nil {
			return fail(err)
		}
		if n < layout.HeaderSize {
			return fail(fmt.Errorf("%w: %d bytes, a header needs %d", ErrTruncated, n, layout.HeaderSize))
		}
		hdr, err = layout.Decode(buf)
		ready := binary.LittleEndian.Uint32(buf[layout.OffReady:]) == layout.ReadyValue
		if ready || (err != nil && !isBlank(buf[:layout.ChecksumedSize])) {
			if err != nil {
				return fail(err)
			}
			break
		}
		// Being initialised in place by another tool (see OpenAny).
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("%w: ready word is %#x; its creator may have died during creation", ErrNotReady, binary.LittleEndian.Uint32(buf[layout.OffReady:])))
		}
		time.Sleep(time.Millisecond)
	}
	if err := unix.Fstat(fd, &st); err != nil {
		return fail(err)
	}
	if err := checkSize(&hdr, st.Size); err != nil {
		return fail(err)
	}
	return hdr, nil
}

// OpenAny is Open for any kind: for inspectors.
func OpenAny(path string, opts ...Option) (*Region, error) {
	path = Resolve(path)
	o := buildOptions(opts)
	prot := unix.PROT_READ | unix.PROT_WRITE
	if o.readOnly {
		prot = unix.PROT_READ
	}
	fd, st, deadline, err := openFile(path, &o)
	if err != nil {
		return nil, pathErr("open", path, err)
	}
	r := &Region{path: path, fd: fd, readOnly: o.readOnly, attachWait: o.attachWait}
	fail := func(err error) (*Region, error) {
		if r.mem != nil {
			_ = unix.Munmap(r.mem)
		}
		_ = unix.Close(fd)
		return nil, pathErr("open", path, err)
	}
	// Holes before any page is touched: on a full tmpfs, the first touch of
	// a hole kills the process with SIGBUS. A writer reserves them now (a
	// full filesystem then fails here); a read-only opener cannot, and
	// refuses the file.
	if hasHoles(fd, &st) {
		if o.readOnly {
			return fail(sparseErr(&st))
		}
		if err := fill(fd, &st); err != nil {
			return fail(err)
		}
	}
	mem, err := unix.Mmap(fd, 0, int(st.Size), prot, unix.MAP_SHARED)
	if err != nil {
		return fail(err)
	}
	r.mem = mem
	// Every read of the mapping from here on is guarded: the file may be
	// truncated (or truncated and restored, leaving holes) between the
	// fstat above and any touch.
	var hdr layout.Header
	if gerr := r.Guard("open", func() error {
		hdr, err = layout.Decode(mem)
		if r.ready().Load() != layout.ReadyValue && (err == nil || isBlank(mem[:layout.ChecksumedSize])) {
			// Being initialised in place by another tool: wait for its ready store.
			if err = r.waitReady(deadline); err != nil {
				return nil
			}
			hdr, err = layout.Decode(mem)
		}
		return nil
	}); gerr != nil { // a fault, named and explained by Guard
		_ = unix.Munmap(mem)
		_ = unix.Close(fd)
		return nil, gerr
	}
	if err != nil {
		return fail(err)
	}
	if err := checkSize(&hdr, st.Size); err != nil {
		return fail(err)
	}
	r.hdr = hdr
	return r, nil
}

// waitReady waits (futex, bounded) for the ready word. The acquire load
// that sees ReadyValue orders every later read after the creator's writes.
func (r *Region) waitReady(deadline time.Time) error {
	w := r.ready()
	for {
		v := w.Load()
		if v == layout.ReadyValue {
			return nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("%w: ready word is %#x; its creator may have died during creation", ErrNotReady, v)
		}
		if err := FutexWait(w, v, min(left, 10*time.Millisecond)); err != nil && !errors.Is(err, ErrTimeout) {
			return err
		}
	}
}

// notShmkit is ErrBadMagic for a file whose first bytes (up to the
// magic's length) are neither the magic (or, in a file shorter than it,
// its start) nor zeros; nil otherwise, and when they cannot be read (the
// caller's checks that follow say why). A file shorter than a header is
// named by its size, as a stray text file is best recognised.
func notShmkit(fd int, size int64) error {
	var b [len(layout.Magic)]byte
	n, err := unix.Pread(fd, b[:min(int(size), len(b))], 0)
	if err != nil || n <= 0 || isBlank(b[:n]) || string(b[:n]) == layout.Magic[:n] {
		return nil
	}
	if size >= layout.HeaderSize {
		return fmt.Errorf("%w: % x", layout.ErrBadMagic, b[:n])
	}
	return fmt.Errorf("%w: a %d-byte file starting % x", layout.ErrBadMagic, size, b[:n])
}

func isBlank(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// checkReadable applies the hostile-directory rules that decide whether
// the file may be read at all: a regular file (a FIFO or device is never
// read), of an owner we trust, with one link (a hard link may be another
// user's way of making us read, and print, a file that is not ours to
// show).
func checkReadable(st *unix.Stat_t, o *options) error {
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("%w: mode %#o", ErrNotRegular, st.Mode&unix.S_IFMT)
	}
	if !o.anyOwner && int(st.Uid) != o.owner {
		return fmt.Errorf("%w: uid %d, expected %d", ErrForeignOwner, st.Uid, o.owner)
	}
	if st.Nlink != 1 {
		return fmt.Errorf("%w: %d links", ErrLinked, st.Nlink)
	}
	return nil
}

// checkMode applies the rule that decides whether a shmkit file may be
// used: no permission bits beyond the allowance.
func checkMode(st *unix.Stat_t, o *options) error {
	if extra := os.FileMode(st.Mode).Perm() &^ o.mode; extra != 0 {
		return fmt.Errorf("%w: mode %#o, allowed %#o", ErrPermissive, os.FileMode(st.Mode).Perm(), o.mode)
	}
	return nil
}

func openErr(err error) error {
	switch {
	case errors.Is(err, unix.ENOENT):
		return ErrNotExist
	case errors.Is(err, unix.EEXIST):
		return ErrExist
	case errors.Is(err, unix.ELOOP):
		return ErrSymlink
	case errors.Is(err, unix.EISDIR):
		return fmt.Errorf("%w: a directory", ErrNotRegular)
	case errors.Is(err, unix.ENXIO):
		// O_NONBLOCK|O_WRONLY on a FIFO without readers, or a socket.
		return fmt.Errorf("%w: %v", ErrNotRegular, err)
	}
	return err
}

// OpenOrCreate opens path if it exists, and otherwise creates it. Any number
// of processes may race: exactly one creates, and all end up attached to the
// same initialised file. created reports whether this call made it. An
// existing file must match spec's kind and geometry.
func OpenOrCreate(path string, spec Spec, opts ...Option) (r *Region, created bool, err error) {
	for attempt := 0; ; attempt++ {
		r, err = Open(path, spec.Kind, opts...)
		if err == nil {
			if r.hdr.Geometry != spec.Geometry {
				r.Close()
				return nil, false, pathErr("open", Resolve(path), fmt.Errorf("%w: existing geometry %+v, wanted %+v", layout.ErrGeometry, r.hdr.Geometry, spec.Geometry))
			}
			return r, false, nil
		}
		if !errors.Is(err, ErrNotExist) {
			return nil, false, err
		}
		r, err = Create(path, spec, opts...)
		if err == nil {
			return r, true, nil
		}
		// Lost the race to another creator: its file is now in place.
		if !errors.Is(err, ErrExist) || attempt >= 3 {
			return nil, false, err
		}
	}
}

// Remove unlinks a shmkit file by name or path. Processes that have it
// mapped keep using it; new opens fail.
func Remove(path string) error {
	path = Resolve(path)
	if err := unix.Unlink(path); err != nil {
		return pathErr("remove", path, openErr(err))
	}
	return nil
}
