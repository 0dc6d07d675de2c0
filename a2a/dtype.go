package a2a

// DType is the element type of a token row. Dispatch moves rows as opaque
// bytes, so only the element size matters there; combine decodes expert
// outputs and rounds its fp32 sums, so it needs a real floating type.
type DType uint8

const (
	// DTypeInvalid is the zero value; Config validation rejects it, so a
	// forgotten field is an error instead of a silent default.
	DTypeInvalid DType = iota
	// FP8 is one opaque byte per element (e4m3 or e5m2: a2a never looks
	// inside). Dispatch only.
	FP8
	// BF16 is bfloat16.
	BF16
	// FP16 is IEEE 754 binary16.
	FP16
	// FP32 is IEEE 754 binary32.
	FP32
)

// Size returns the element size in bytes, 0 for an invalid type.
func (t DType) Size() int {
	switch t {
	case FP8:
		return 1
	case BF16, FP16:
		return 2
	case FP32:
		return 4
	}
	return 0
}

// Valid reports whether t is one of the defined types.
func (t DType) Valid() bool { return t.Size() != 0 }

// CombineCapable reports whether combine can accumulate in t.
func (t DType) CombineCapable() bool { return t == BF16 || t == FP16 || t == FP32 }

func (t DType) String() string {
	switch t {
	case FP8:
		return "fp8"
	case BF16:
		return "bf16"
	case FP16:
		return "fp16"
	case FP32:
		return "fp32"
	}
	return "invalid"
}

// ParseDType maps "fp8", "bf16", "fp16", "fp32" (and the aliases
// "float8_e4m3fn", "bfloat16", "float16", "half", "float32", "float") to a
// DType. It returns DTypeInvalid and false for anything else.
func ParseDType(s string) (DType, bool) {
	switch s {
	case "fp8", "float8_e4m3fn", "e4m3", "float8":
		return FP8, true
	case "bf16", "bfloat16":
		return BF16, true
	case "fp16", "float16", "half":
		return FP16, true
	case "fp32", "float32", "float":
		return FP32, true
	}
	return DTypeInvalid, false
}
