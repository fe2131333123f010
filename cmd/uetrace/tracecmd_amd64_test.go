package main

import "golang.org/x/sys/unix"

// x86-64's glibc makes select(3) the select system call.
func init() { recorderCalls[unix.SYS_SELECT] = true }
