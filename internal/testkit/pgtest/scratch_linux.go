package pgtest

import "golang.org/x/sys/unix"

// shm is the memory file system Linux machines mount for POSIX shared
// memory; Debian's is half the RAM, a container's often 64 MB.
const shm = "/dev/shm"

// memoryRoot returns /dev/shm if it is a tmpfs this process may write in
// with at least free bytes available, else "".
func memoryRoot(free uint64) string {
	var st unix.Statfs_t
	if err := unix.Statfs(shm, &st); err != nil || st.Type != unix.TMPFS_MAGIC {
		return ""
	}
	if st.Bavail*uint64(st.Bsize) < free || unix.Access(shm, unix.W_OK) != nil { //nolint:gosec // Bsize is a block size, never negative
		return ""
	}
	return shm
}
