package eventheader

import "strconv"

// Flags is the first byte of the header: the event's pointer size, byte
// order and whether extension blocks follow.
type Flags uint8

const (
	FlagPointer64    Flags = 0x01 // pointers are 64 bits (else 32)
	FlagLittleEndian Flags = 0x02 // the event is little-endian (else big-endian)
	FlagExtension    Flags = 0x04 // at least one extension block follows the header

	// FlagsKnown are the flags this version of the format defines; a
	// decoder refuses an event with any other bit set.
	FlagsKnown = FlagPointer64 | FlagLittleEndian | FlagExtension
)

// Level is an event's severity; 0 is invalid, values above 5 are allowed
// but have no defined meaning.
type Level uint8

const (
	LevelInvalid Level = iota
	LevelCriticalError
	LevelError
	LevelWarning
	LevelInformation
	LevelVerbose
)

// Opcode gives an event special semantics, e.g. the start and stop of an
// activity.
type Opcode uint8

const (
	OpcodeInfo Opcode = iota
	OpcodeActivityStart
	OpcodeActivityStop
	OpcodeCollectionStart
	OpcodeCollectionStop
	OpcodeExtension
	OpcodeReply
	OpcodeResume
	OpcodeSuspend
	OpcodeSend
	OpcodeReceive Opcode = 0xf0
)

// HeaderSize is the size of the header every EventHeader event starts with.
const HeaderSize = 8

// Header is the fixed 8-byte header: flags, version, id, tag, opcode,
// level. ID and Tag are in the event's byte order on the wire.
type Header struct {
	Flags   Flags
	Version uint8  // incremented when the layout of an event with a nonzero ID changes
	ID      uint16 // stable event id, or 0
	Tag     uint16 // provider-defined, or 0
	Opcode  Opcode
	Level   Level // must equal the level in the tracepoint name
}

// ExtensionKind is the type of an extension block; the top bit
// (ExtensionChain) says another block follows.
type ExtensionKind uint16

const (
	ExtensionInvalid    ExtensionKind = 0
	ExtensionMetadata   ExtensionKind = 1 // event name and field definitions
	ExtensionActivityID ExtensionKind = 2 // 16-byte activity id, optionally a 16-byte related id

	ExtensionKindMask ExtensionKind = 0x7fff
	ExtensionChain    ExtensionKind = 0x8000
)

// Encoding is a field's encoding byte: the low 5 bits say how the value is
// laid out and sized, the top 3 bits are flags.
type Encoding uint8

const (
	EncodingInvalid              Encoding = iota
	EncodingStruct                        // no data; groups the next Format&0x7f fields
	EncodingValue8                        // 1 byte, default format unsigned int
	EncodingValue16                       // 2 bytes, default format unsigned int
	EncodingValue32                       // 4 bytes, default format unsigned int
	EncodingValue64                       // 8 bytes, default format unsigned int
	EncodingValue128                      // 16 bytes, default format hex bytes
	EncodingZStringChar8                  // NUL-terminated 8-bit chars, default format UTF
	EncodingZStringChar16                 // NUL-terminated 16-bit chars, default format UTF
	EncodingZStringChar32                 // NUL-terminated 32-bit chars, default format UTF
	EncodingStringLength16Char8           // u16 count then 8-bit chars, default format UTF
	EncodingStringLength16Char16          // u16 count then 16-bit chars, default format UTF
	EncodingStringLength16Char32          // u16 count then 32-bit chars, default format UTF
	EncodingBinaryLength16Char8           // u16 count then bytes, default format hex bytes
	EncodingMax                           // first undefined encoding

	EncodingValueMask Encoding = 0x1f
	EncodingFlagMask  Encoding = 0xe0
	EncodingCArray    Encoding = 0x20 // constant-length array, count (never 0) in the metadata
	EncodingVArray    Encoding = 0x40 // variable-length array, u16 count in the data
	EncodingChain     Encoding = 0x80 // a format byte follows the encoding byte

	// EncodingArrayMask selects the array flags; both set is reserved.
	EncodingArrayMask = EncodingCArray | EncodingVArray
)

var encodingNames = [...]string{"invalid", "struct", "value8", "value16", "value32", "value64", "value128",
	"zstring_char8", "zstring_char16", "zstring_char32", "string_length16_char8",
	"string_length16_char16", "string_length16_char32", "binary_length16_char8"}

// String names the encoding as eventheader.h does, with its flags.
func (e Encoding) String() string {
	v := e & EncodingValueMask
	s := ""
	if int(v) < len(encodingNames) {
		s = encodingNames[v]
	} else {
		s = "encoding" + strconv.Itoa(int(v))
	}
	if e&EncodingCArray != 0 {
		s += "|carray"
	}
	if e&EncodingVArray != 0 {
		s += "|varray"
	}
	if e&EncodingChain != 0 {
		s += "|chain"
	}
	return s
}

// FixedSize returns the size of one value of a fixed-size encoding
// (value8..value128), or 0 for others.
func (e Encoding) FixedSize() int {
	switch e & EncodingValueMask {
	case EncodingValue8:
		return 1
	case EncodingValue16:
		return 2
	case EncodingValue32:
		return 4
	case EncodingValue64:
		return 8
	case EncodingValue128:
		return 16
	}
	return 0
}

// CharSize returns the size of one character unit of a string or binary
// encoding, or 0 for others.
func (e Encoding) CharSize() int {
	switch e & EncodingValueMask {
	case EncodingZStringChar8, EncodingStringLength16Char8, EncodingBinaryLength16Char8:
		return 1
	case EncodingZStringChar16, EncodingStringLength16Char16:
		return 2
	case EncodingZStringChar32, EncodingStringLength16Char32:
		return 4
	}
	return 0
}

// Format is a field's format byte: the low 7 bits say how to show the
// value (for a struct: its number of fields), the top bit (FormatChain)
// says a 16-bit field tag follows.
type Format uint8

const (
	FormatDefault           Format = iota // the encoding's default
	FormatUnsignedInt                     // value8..value64
	FormatSignedInt                       // value8..value64
	FormatHexInt                          // value8..value64
	FormatErrno                           // value32
	FormatPid                             // value32
	FormatTime                            // value32, value64: seconds since 1970
	FormatBoolean                         // value8..value32
	FormatFloat                           // value32, value64
	FormatHexBytes                        // any encoding
	FormatString8                         // value8 and char8: 8-bit characters, no character set
	FormatStringUTF                       // value16, value32, char8..char32
	FormatStringUTFBOM                    // char8..char32: a BOM, if present, gives the encoding
	FormatStringXML                       // like FormatStringUTFBOM
	FormatStringJSON                      // like FormatStringUTFBOM
	FormatUUID                            // value128, network byte order
	FormatPort                            // value16, network byte order
	FormatIPAddress                       // value32 (IPv4) or value128 (IPv6), network byte order
	FormatIPAddressObsolete               // decoded as FormatIPAddress; never produce it

	FormatValueMask Format = 0x7f
	FormatChain     Format = 0x80 // a 16-bit field tag follows the format byte

	FormatIPv4 = FormatIPAddress         // deprecated alias
	FormatIPv6 = FormatIPAddressObsolete // deprecated alias
)

var formatNames = [...]string{"default", "unsigned_int", "signed_int", "hex_int", "errno", "pid", "time",
	"boolean", "float", "hex_bytes", "string8", "string_utf", "string_utf_bom", "string_xml",
	"string_json", "uuid", "port", "ip_address", "ip_address_obsolete"}

// String names the format as eventheader.h does.
func (f Format) String() string {
	v := f & FormatValueMask
	s := ""
	if int(v) < len(formatNames) {
		s = formatNames[v]
	} else {
		s = "format" + strconv.Itoa(int(v))
	}
	if f&FormatChain != 0 {
		s += "|chain"
	}
	return s
}
