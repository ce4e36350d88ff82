// Package boundedfile reads whole files that may be hostile or simply
// wrong: never more than a limit, never blocking on a FIFO or a device,
// and, for files another party can write (the VM's shared folder),
// without following a symbolic link.
//
// It is the repository's one "read this file, bounded" helper: a 64 GiB
// sparse file, a FIFO nobody writes to or a link to /etc/shadow must
// neither take the reader down, hang it, nor leak another file.
package boundedfile

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// TooLargeError is returned for a file larger than the limit; nothing
// beyond limit+1 bytes was read.
type TooLargeError struct {
	Name  string
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s is larger than %d bytes", e.Name, e.Limit)
}

// ErrNotRegular is wrapped by the error for a directory, FIFO, socket or
// device (and, from ReadNoFollow, a symbolic link).
var ErrNotRegular = errors.New("not a regular file")

// Read reads the whole file name, following symbolic links (for files the
// user chose, such as their app.json). A file over limit bytes is a
// *TooLargeError; anything but a regular file wraps ErrNotRegular, and
// opening a FIFO does not wait for a writer.
func Read(name string, limit int64) ([]byte, error) {
	return read(name, limit, openFlags)
}

// ReadNoFollow is Read for files another party can write: a symbolic link
// as the last element of name is refused (O_NOFOLLOW) instead of followed.
// The caller is responsible for the directories in name being its own.
func ReadNoFollow(name string, limit int64) ([]byte, error) {
	return read(name, limit, openFlags|noFollow)
}

// OpenNoFollow opens name for a streamed, bounded read of a file another
// party can write: a symbolic link as its last element, a FIFO, a device or
// a directory is refused (wrapping ErrNotRegular), and a file over limit
// bytes is a *TooLargeError. The caller bounds its own reads by limit too:
// the file may grow after the check.
func OpenNoFollow(name string, limit int64) (*os.File, error) {
	return open(name, limit, openFlags|noFollow)
}

func open(name string, limit int64, flags int) (*os.File, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|flags, 0)
	if err != nil {
		if isSymlinkRefused(err) {
			return nil, fmt.Errorf("%s is a symbolic link: %w", name, ErrNotRegular)
		}
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is %s: %w", name, kind(st.Mode()), ErrNotRegular)
	}
	if st.Size() > limit { // cheap refusal; the read is bounded anyway
		f.Close()
		return nil, &TooLargeError{Name: name, Limit: limit}
	}
	return f, nil
}

func read(name string, limit int64, flags int) ([]byte, error) {
	f, err := open(name, limit, flags)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if int64(len(data)) > limit {
		return nil, &TooLargeError{Name: name, Limit: limit}
	}
	return data, nil
}

func kind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	default:
		return "a special file"
	}
}
