//go:build !amd64 || purego

package rows

// stream has no streaming loop in this build: Copy uses copy.
func stream(dst, src []byte) bool { return false }

// fence has nothing to order: no store is streamed in this build.
func fence() {}
