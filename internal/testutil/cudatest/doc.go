// Package cudatest gives GPU tests outside the cuda package their device
// context: testutil.RequireCUDA bound to the cuda package.
package cudatest
