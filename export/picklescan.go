package export

import (
	"encoding/binary"
	"fmt"
	"math"
)

// scanPickle walks the opcodes of the pickle at the start of data (protocols 0 to 5) without
// building anything and returns the offset just past its STOP. Every length an opcode states
// must fit in the bytes that follow it, so that the decoder, which allocates each argument
// before reading it, allocates at most len(data) bytes per opcode; an unknown opcode, a
// negative length, a LONG1 of zero bytes and a LONG of more than torchMaxLongBytes bytes are
// errors naming the opcode and its offset.
func scanPickle(data []byte) (int, error) {
	i := 0
	need := func(op byte, at, n int) error {
		if n < 0 || n > len(data)-i {
			return fmt.Errorf("opcode 0x%02x at byte %d: argument of %d bytes, %d left", op, at, n, len(data)-i)
		}
		return nil
	}
	line := func(op byte, at int) error {
		for j := i; j < len(data); j++ {
			if data[j] == '\n' {
				i = j + 1
				return nil
			}
		}
		return fmt.Errorf("opcode 0x%02x at byte %d: unterminated line", op, at)
	}
	for i < len(data) {
		at, op := i, data[i]
		i++
		var n int
		switch op {
		case '.': // STOP
			return i, nil
		case '(', '0', '1', '2', 'N', 'Q', 'R', 'a', 'b', 'd', '}', 'e', 'l', ']', 'o', 's', 't', ')', 'u',
			0x81, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8f, 0x90, 0x91, 0x92, 0x93, 0x94, 0x97, 0x98:
			continue // no argument
		case 'K', 'h', 'q', 0x80, 0x82: // BININT1 BINGET BINPUT PROTO EXT1
			n = 1
		case 'M', 0x83: // BININT2 EXT2
			n = 2
		case 'J', 'j', 'r', 0x84: // BININT LONG_BINGET LONG_BINPUT EXT4
			n = 4
		case 'G': // BINFLOAT
			n = 8
		case 'F', 'I', 'L', 'P', 'S', 'V', 'g', 'p': // FLOAT INT LONG PERSID STRING UNICODE GET PUT
			if err := line(op, at); err != nil {
				return 0, err
			}
			if op == 'L' && i-at-2 > 3*torchMaxLongBytes {
				return 0, fmt.Errorf("opcode LONG at byte %d: an integer of %d digits (at most %d bytes are read)", at, i-at-2, torchMaxLongBytes)
			}
			continue
		case 'c', 'i': // GLOBAL INST
			if err := line(op, at); err != nil {
				return 0, err
			}
			if err := line(op, at); err != nil {
				return 0, err
			}
			continue
		case 'U', 'C', 0x8c, 0x8a: // SHORT_BINSTRING SHORT_BINBYTES SHORT_BINUNICODE LONG1
			if err := need(op, at, 1); err != nil {
				return 0, err
			}
			n = int(data[i])
			i++
			if op == 0x8a && (n == 0 || n > torchMaxLongBytes) {
				return 0, fmt.Errorf("opcode LONG1 at byte %d: an integer of %d bytes (1 to %d are read)", at, n, torchMaxLongBytes)
			}
		case 'T', 'X', 'B', 0x8b: // BINSTRING BINUNICODE BINBYTES LONG4
			if err := need(op, at, 4); err != nil {
				return 0, err
			}
			u := binary.LittleEndian.Uint32(data[i:])
			i += 4
			if (op == 'T' || op == 0x8b) && int32(u) < 0 {
				return 0, fmt.Errorf("opcode 0x%02x at byte %d: negative length %d", op, at, int32(u))
			}
			if op == 0x8b && u > torchMaxLongBytes {
				return 0, fmt.Errorf("opcode LONG4 at byte %d: an integer of %d bytes (at most %d are read)", at, u, torchMaxLongBytes)
			}
			n = int(u)
		case 0x8d, 0x8e, 0x96, 0x95: // BINUNICODE8 BINBYTES8 BYTEARRAY8 FRAME
			if err := need(op, at, 8); err != nil {
				return 0, err
			}
			u := binary.LittleEndian.Uint64(data[i:])
			i += 8
			if u > math.MaxInt32 || int(u) > len(data)-i {
				return 0, fmt.Errorf("opcode 0x%02x at byte %d: argument of %d bytes, %d left", op, at, u, len(data)-i)
			}
			if op == 0x95 {
				continue // the frame's opcodes follow and are scanned in turn
			}
			n = int(u)
		default:
			return 0, fmt.Errorf("unknown opcode 0x%02x at byte %d", op, at)
		}
		if err := need(op, at, n); err != nil {
			return 0, err
		}
		i += n
	}
	return 0, fmt.Errorf("no STOP opcode in %d bytes", len(data))
}
