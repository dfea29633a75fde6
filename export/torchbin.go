package export

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"strings"

	"github.com/nlpodyssey/gopickle/pickle"
	"github.com/nlpodyssey/gopickle/types"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/internal/bounded"
)

// PyTorch state dicts (pytorch_model.bin): what transformers' save_pretrained wrote before
// safetensors, torch.save(model.state_dict()). The pickle is decoded by gopickle
// (github.com/nlpodyssey/gopickle/pickle) with this file's classes for the few globals a state
// dict holds; the storages are read here, with every size checked against the file first.

// PyTorchFile is the file name of a PyTorch state dict in a Hugging Face model directory.
const PyTorchFile = "pytorch_model.bin"

// torchViewFactor bounds how often the tensors of a state dict may view the same stored bytes
// (tied weights view them twice): the tensors' bytes together may be at most this many times
// the bytes of the storages they view, so that a few bytes of pickle cannot make the reader
// allocate more than a small multiple of the file.
const torchViewFactor = 4

// torchMaxLongBytes bounds the integers of the pickle (LONG1, LONG4): sizes, strides and offsets
// fit in 8 bytes, and decoding longer ones costs quadratic time.
const torchMaxLongBytes = 16

// readTorchStateDict reads the state dict of a PyTorch checkpoint: the zip archive torch.save
// writes since torch 1.6 (<name>/data.pkl and the storages <name>/data/<key>, stored
// uncompressed) or the legacy format before it (a sequence of pickles, then the storages). The
// file must hold a dict (or OrderedDict) from names to tensors of floating-point, integer or
// bool storages, saved little-endian; views (offsets, strides, shared storages) are resolved. The
// tensors are returned in the dict's order as raw row-major little-endian data (F32, F16, BF16,
// F64, I64, I32, I16, I8, U8, BOOL).
//
// Errors name the file and, where one is at fault, the tensor or archive entry: a pickle that
// does not parse, a global other than the state dict's (collections.OrderedDict,
// torch._utils._rebuild_tensor_v2, torch._utils._rebuild_parameter, torch.<Type>Storage), a
// storage whose size disagrees with its entry, a tensor outside its storage, a compressed
// entry. Every size the file states is compared with the file's size before anything is
// allocated from it.
func readTorchStateDict(path string) ([]checkpoints.RawTensor, error) {
	f, err := bounded.OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	var head [4]byte
	if _, err := io.ReadFull(f, head[:]); err != nil {
		return nil, fmt.Errorf("%s: %d bytes, not a PyTorch checkpoint", path, st.Size())
	}
	r := &torchReader{path: path, size: st.Size(), storages: map[string]*torchStorage{}}
	var obj any
	if string(head[:]) == "PK\x03\x04" {
		obj, err = r.loadZip(f)
	} else {
		obj, err = r.loadLegacy(f)
	}
	if err != nil {
		return nil, err
	}
	return r.stateDict(obj)
}

// torchReader is one readTorchStateDict: the file and the storages its pickle names.
type torchReader struct {
	path     string
	size     int64 // of the file
	storages map[string]*torchStorage
	order    []*torchStorage
	legacy   bool
	// loadStorage reads a storage's bytes (zip format; the legacy format fills data itself).
	loadStorage func(s *torchStorage) error
}

// torchStorageType is a storage class of the pickle (torch.FloatStorage, ...).
type torchStorageType struct {
	name  string
	dtype checkpoints.DType
}

// torchStorage is one storage: numel elements of dtype, data once read.
type torchStorage struct {
	key   string
	dtype checkpoints.DType
	numel int64
	data  []byte
	read  bool
}

// torchTensor is a tensor of the pickle: a view of a storage.
type torchTensor struct {
	storage *torchStorage
	offset  int64 // in elements
	shape   []int
	stride  []int // in elements
}

var torchStorageTypes = map[string]checkpoints.DType{
	"FloatStorage": checkpoints.F32, "HalfStorage": checkpoints.F16, "BFloat16Storage": checkpoints.BF16,
	"DoubleStorage": checkpoints.F64, "LongStorage": checkpoints.I64, "IntStorage": checkpoints.I32,
	"ShortStorage": checkpoints.I16, "CharStorage": checkpoints.I8, "ByteStorage": checkpoints.U8,
	"BoolStorage": checkpoints.BOOL,
}

// findClass resolves the globals of a state dict's pickle; any other global is an error
// (collections.OrderedDict is gopickle's own).
func (r *torchReader) findClass(module, name string) (any, error) {
	switch module + "." + name {
	case "torch._utils._rebuild_tensor_v2":
		return torchRebuildTensor{}, nil
	case "torch._utils._rebuild_parameter", "torch._utils._rebuild_parameter_with_state":
		return torchRebuildParameter{}, nil
	}
	if module == "torch" {
		if dt, ok := torchStorageTypes[name]; ok {
			return &torchStorageType{name: "torch." + name, dtype: dt}, nil
		}
		if strings.HasSuffix(name, "Storage") {
			return nil, fmt.Errorf("storage type torch.%s is not read (floating-point, integer and bool storages are)", name)
		}
	}
	return nil, fmt.Errorf("global %s.%s: a state dict of tensors holds no such object (this reader builds only OrderedDict, tensors and storages)", module, name)
}

// persistentLoad resolves a storage reference: ('storage', type, key, location, numel) in the
// zip format, with a sixth element view_metadata (None) in the legacy one. Nothing is read or
// allocated here.
func (r *torchReader) persistentLoad(pid any) (any, error) {
	t, ok := pid.(*types.Tuple)
	if !ok || t.Len() == 0 {
		return nil, fmt.Errorf("persistent id %s, want a tuple ('storage', ...)", pyType(pid))
	}
	if kind, _ := t.Get(0).(string); kind != "storage" {
		return nil, fmt.Errorf("persistent id of kind %q, want 'storage' (saved modules are not read)", fmt.Sprint(t.Get(0)))
	}
	want := 5
	if r.legacy {
		want = 6
	}
	if t.Len() != want {
		return nil, fmt.Errorf("storage reference of %d elements, want %d", t.Len(), want)
	}
	typ, ok1 := t.Get(1).(*torchStorageType)
	key, ok2 := t.Get(2).(string)
	_, ok3 := t.Get(3).(string)
	numel, ok4 := t.Get(4).(int)
	if !ok1 || !ok2 || !ok3 || !ok4 || numel < 0 {
		return nil, fmt.Errorf("storage reference (%s, %s, %s, %s), want (storage type, key, location, element count >= 0)",
			pyType(t.Get(1)), pyType(t.Get(2)), pyType(t.Get(3)), pyType(t.Get(4)))
	}
	if r.legacy && t.Get(5) != nil {
		return nil, fmt.Errorf("storage %q: a storage view (view_metadata) is not read", key)
	}
	if s, ok := r.storages[key]; ok {
		if s.dtype != typ.dtype || s.numel != int64(numel) {
			return nil, fmt.Errorf("storage %q is referenced as %d %s elements and as %d %s elements", key, s.numel, s.dtype, numel, typ.dtype)
		}
		return s, nil
	}
	s := &torchStorage{key: key, dtype: typ.dtype, numel: int64(numel)}
	r.storages[key] = s
	r.order = append(r.order, s)
	return s, nil
}

// torchRebuildTensor is torch._utils._rebuild_tensor_v2(storage, storage_offset, size, stride,
// requires_grad, backward_hooks[, metadata]).
type torchRebuildTensor struct{}

func (torchRebuildTensor) Call(args ...any) (any, error) {
	if len(args) != 6 && len(args) != 7 {
		return nil, fmt.Errorf("_rebuild_tensor_v2 with %d arguments, want 6 or 7", len(args))
	}
	s, ok1 := args[0].(*torchStorage)
	off, ok2 := args[1].(int)
	size, ok3 := args[2].(*types.Tuple)
	stride, ok4 := args[3].(*types.Tuple)
	if !ok1 || !ok2 || !ok3 || !ok4 || off < 0 {
		return nil, fmt.Errorf("_rebuild_tensor_v2(%s, %s, %s, %s, ...), want (storage, offset >= 0, size tuple, stride tuple, ...)",
			pyType(args[0]), pyType(args[1]), pyType(args[2]), pyType(args[3]))
	}
	t := &torchTensor{storage: s, offset: int64(off)}
	var err error
	if t.shape, err = intTuple(size, "size"); err != nil {
		return nil, err
	}
	if t.stride, err = intTuple(stride, "stride"); err != nil {
		return nil, err
	}
	if len(t.shape) != len(t.stride) {
		return nil, fmt.Errorf("_rebuild_tensor_v2: size %v and stride %v differ in length", t.shape, t.stride)
	}
	return t, nil
}

// torchRebuildParameter is torch._utils._rebuild_parameter(data, requires_grad, backward_hooks)
// (and _rebuild_parameter_with_state, with a fourth argument): the parameter's tensor.
type torchRebuildParameter struct{}

func (torchRebuildParameter) Call(args ...any) (any, error) {
	if len(args) < 3 || len(args) > 4 {
		return nil, fmt.Errorf("_rebuild_parameter with %d arguments, want 3 or 4", len(args))
	}
	t, ok := args[0].(*torchTensor)
	if !ok {
		return nil, fmt.Errorf("_rebuild_parameter of a %s, want a tensor", pyType(args[0]))
	}
	return t, nil
}

// intTuple returns the non-negative ints of a size or stride tuple.
func intTuple(t *types.Tuple, what string) ([]int, error) {
	out := make([]int, t.Len())
	for i := range out {
		v, ok := t.Get(i).(int)
		if !ok || v < 0 {
			return nil, fmt.Errorf("_rebuild_tensor_v2: %s[%d] is %s, want an int >= 0", what, i, pyType(t.Get(i)))
		}
		out[i] = v
	}
	return out, nil
}

// pyType names the Python type of a decoded pickle value, for errors.
func pyType(v any) string {
	switch v := v.(type) {
	case nil:
		return "None"
	case bool:
		return "bool"
	case int, *big.Int:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case []byte:
		return "bytes"
	case *types.Tuple:
		return "tuple"
	case *types.List:
		return "list"
	case *types.Dict:
		return "dict"
	case *types.OrderedDict:
		return "OrderedDict"
	case *torchTensor:
		return "tensor"
	case *torchStorage:
		return "storage"
	case *torchStorageType:
		return v.name
	}
	return fmt.Sprintf("%T", v)
}

// unpickle decodes one pickle, data exactly (scanPickle has checked its lengths); a panic of the
// decoder on malformed input becomes an error.
func (r *torchReader) unpickle(data []byte, persistent bool) (obj any, err error) {
	defer func() {
		if p := recover(); p != nil {
			obj, err = nil, fmt.Errorf("malformed pickle (%v)", p)
		}
	}()
	u := pickle.NewUnpickler(bytes.NewReader(data))
	u.FindClass = r.findClass
	if persistent {
		u.PersistentLoad = r.persistentLoad
	}
	return u.Load()
}

// loadZip reads the archive's data.pkl; the storages are read when a tensor needs them.
func (r *torchReader) loadZip(f *os.File) (any, error) {
	zr, err := zip.NewReader(f, r.size)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.path, err)
	}
	entries := make(map[string]*zip.File, len(zr.File))
	prefix := ""
	for _, zf := range zr.File {
		if _, dup := entries[zf.Name]; dup {
			return nil, fmt.Errorf("%s: entry %s appears twice in the archive", r.path, zf.Name)
		}
		entries[zf.Name] = zf
		dir, base, ok := strings.Cut(zf.Name, "/")
		if ok && base == "data.pkl" {
			if prefix != "" {
				return nil, fmt.Errorf("%s: two pickles, %sdata.pkl and %s", r.path, prefix, zf.Name)
			}
			prefix = dir + "/"
		}
	}
	if prefix == "" {
		return nil, fmt.Errorf("%s: a zip archive without <name>/data.pkl, not a PyTorch checkpoint", r.path)
	}
	if _, ok := entries[prefix+"constants.pkl"]; ok {
		return nil, fmt.Errorf("%s: a TorchScript archive (%sconstants.pkl), not a state dict saved by torch.save", r.path, prefix)
	}
	if bo, ok := entries[prefix+"byteorder"]; ok {
		b, err := r.readEntry(bo)
		if err != nil {
			return nil, err
		}
		if string(b) != "little" {
			return nil, fmt.Errorf("%s: %s is %q; only little-endian checkpoints are read", r.path, bo.Name, b)
		}
	}
	data, err := r.readEntry(entries[prefix+"data.pkl"])
	if err != nil {
		return nil, err
	}
	if err := r.scanOne(data, prefix+"data.pkl"); err != nil {
		return nil, err
	}
	obj, err := r.unpickle(data, true)
	if err != nil {
		return nil, fmt.Errorf("%s: %sdata.pkl: %w", r.path, prefix, err)
	}
	r.loadStorage = func(s *torchStorage) error {
		name := prefix + "data/" + s.key
		zf, ok := entries[name]
		if !ok {
			return fmt.Errorf("%s: storage %q: no entry %s in the archive", r.path, s.key, name)
		}
		want, err := storageBytes(s)
		if err != nil {
			return err
		}
		if zf.UncompressedSize64 != uint64(want) {
			return fmt.Errorf("%s: entry %s holds %d bytes; its storage is %d %s elements (%d bytes)", r.path, name, zf.UncompressedSize64, s.numel, s.dtype, want)
		}
		s.data, err = r.readEntry(zf)
		return err
	}
	return obj, nil
}

// storageBytes is numel·element size, checked for overflow.
func storageBytes(s *torchStorage) (int64, error) {
	es := int64(s.dtype.Size())
	if s.numel > (1<<62)/es {
		return 0, fmt.Errorf("storage %q: %d %s elements overflow", s.key, s.numel, s.dtype)
	}
	return s.numel * es, nil
}

// readEntry reads an uncompressed archive entry whose size is at most the file's, checking its
// CRC-32.
func (r *torchReader) readEntry(zf *zip.File) ([]byte, error) {
	if zf.Method != zip.Store {
		return nil, fmt.Errorf("%s: entry %s is compressed (method %d); torch.save stores its entries uncompressed", r.path, zf.Name, zf.Method)
	}
	if zf.UncompressedSize64 > uint64(r.size) || zf.CompressedSize64 != zf.UncompressedSize64 {
		return nil, fmt.Errorf("%s: entry %s declares %d bytes (%d stored) in a file of %d bytes", r.path, zf.Name, zf.UncompressedSize64, zf.CompressedSize64, r.size)
	}
	rc, err := zf.Open()
	if err != nil {
		return nil, fmt.Errorf("%s: entry %s: %w", r.path, zf.Name, err)
	}
	defer rc.Close()
	data := make([]byte, zf.UncompressedSize64)
	if _, err := io.ReadFull(rc, data); err != nil {
		return nil, fmt.Errorf("%s: entry %s: %w", r.path, zf.Name, err)
	}
	var one [1]byte
	if n, err := rc.Read(one[:]); n != 0 || err != io.EOF { // io.EOF also checks the CRC-32
		if err == nil || err == io.EOF {
			err = errors.New("longer than declared")
		}
		return nil, fmt.Errorf("%s: entry %s: %w", r.path, zf.Name, err)
	}
	return data, nil
}

// scanOne checks that data is exactly one pickle.
func (r *torchReader) scanOne(data []byte, what string) error {
	end, err := scanPickle(data)
	if err != nil {
		return fmt.Errorf("%s: %s: %w", r.path, what, err)
	}
	if end != len(data) {
		return fmt.Errorf("%s: %s: %d bytes after the pickle's STOP", r.path, what, len(data)-end)
	}
	return nil
}

// The legacy format's magic number and protocol version (torch/serialization.py).
const (
	torchLegacyMagic    = "1950a86a20f9469cfc6c"
	torchLegacyProtocol = 1001
)

// loadLegacy reads the legacy format: pickles of the magic number, the protocol version, the
// system information and the object, a pickle of the storage keys, then per key an int64
// element count and the storage's bytes.
func (r *torchReader) loadLegacy(f *os.File) (any, error) {
	r.legacy = true
	data := make([]byte, r.size)
	if _, err := f.ReadAt(data, 0); err != nil {
		return nil, fmt.Errorf("%s: %w", r.path, err)
	}
	pos := 0
	next := func(what string, persistent bool) (any, error) {
		end, err := scanPickle(data[pos:])
		if err != nil {
			return nil, fmt.Errorf("%s: %s pickle at byte %d: %w (neither a zip archive nor a legacy PyTorch file)", r.path, what, pos, err)
		}
		obj, err := r.unpickle(data[pos:pos+end], persistent)
		if err != nil {
			return nil, fmt.Errorf("%s: %s pickle at byte %d: %w", r.path, what, pos, err)
		}
		pos += end
		return obj, nil
	}
	magic, err := next("magic number", false)
	if err != nil {
		return nil, err
	}
	if m, ok := magic.(*big.Int); !ok || m.Text(16) != torchLegacyMagic {
		return nil, fmt.Errorf("%s: not a PyTorch checkpoint (neither a zip archive nor the legacy format's magic number)", r.path)
	}
	if v, err := next("protocol version", false); err != nil {
		return nil, err
	} else if v != torchLegacyProtocol {
		return nil, fmt.Errorf("%s: legacy protocol version %v, want %d", r.path, v, torchLegacyProtocol)
	}
	info, err := next("system information", false)
	if err != nil {
		return nil, err
	}
	if d, ok := info.(*types.Dict); ok {
		if le, ok := d.Get("little_endian"); ok && le != true {
			return nil, fmt.Errorf("%s: saved on a big-endian machine; only little-endian checkpoints are read", r.path)
		}
	}
	obj, err := next("state dict", true)
	if err != nil {
		return nil, err
	}
	keysObj, err := next("storage keys", false)
	if err != nil {
		return nil, err
	}
	keys, ok := keysObj.(*types.List)
	if !ok {
		return nil, fmt.Errorf("%s: storage keys are a %s, want a list", r.path, pyType(keysObj))
	}
	for i := range keys.Len() {
		key, ok := keys.Get(i).(string)
		s := r.storages[key]
		if !ok || s == nil {
			return nil, fmt.Errorf("%s: storage key %d (%v) names no storage of the state dict", r.path, i, keys.Get(i))
		}
		if s.read {
			return nil, fmt.Errorf("%s: storage %q is listed twice", r.path, key)
		}
		if len(data)-pos < 8 {
			return nil, fmt.Errorf("%s: storage %q: the file ends at byte %d, before its element count", r.path, key, len(data))
		}
		numel := int64(binary.LittleEndian.Uint64(data[pos:]))
		pos += 8
		if numel != s.numel {
			return nil, fmt.Errorf("%s: storage %q holds %d elements; the pickle says %d", r.path, key, numel, s.numel)
		}
		n, err := storageBytes(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.path, err)
		}
		if n > int64(len(data)-pos) {
			return nil, fmt.Errorf("%s: storage %q: %d bytes at byte %d, past the end of the file (%d bytes)", r.path, key, n, pos, len(data))
		}
		s.data, s.read = data[pos:pos+int(n)], true
		pos += int(n)
	}
	if pos != len(data) {
		return nil, fmt.Errorf("%s: %d bytes after the last storage", r.path, len(data)-pos)
	}
	r.loadStorage = func(s *torchStorage) error {
		return fmt.Errorf("%s: storage %q is not in the list of saved storages", r.path, s.key)
	}
	return obj, nil
}

// stateDict converts the unpickled object, a dict of tensors, to raw tensors.
func (r *torchReader) stateDict(obj any) ([]checkpoints.RawTensor, error) {
	type entry struct {
		key, value any
	}
	var entries []entry
	switch d := obj.(type) {
	case *types.OrderedDict:
		for e := d.List.Front(); e != nil; e = e.Next() {
			oe := e.Value.(*types.OrderedDictEntry)
			entries = append(entries, entry{oe.Key, oe.Value})
		}
	case *types.Dict:
		for _, e := range *d {
			entries = append(entries, entry{e.Key, e.Value})
		}
	default:
		return nil, fmt.Errorf("%s: holds a %s, not a state dict (a dict of tensors)", r.path, pyType(obj))
	}
	tensors := make([]*torchTensor, len(entries))
	names := make([]string, len(entries))
	seen := make(map[string]bool, len(entries))
	var viewed, stored int64
	for i, e := range entries {
		name, ok := e.key.(string)
		if !ok {
			return nil, fmt.Errorf("%s: a state dict key is a %s, want a name (str)", r.path, pyType(e.key))
		}
		if seen[name] {
			return nil, fmt.Errorf("%s: tensor %q appears twice", r.path, name)
		}
		seen[name] = true
		t, ok := e.value.(*torchTensor)
		if !ok {
			return nil, fmt.Errorf("%s: entry %q holds a Python %s, not a tensor", r.path, name, pyType(e.value))
		}
		n, err := t.check()
		if err != nil {
			return nil, fmt.Errorf("%s: tensor %q: %w", r.path, name, err)
		}
		viewed += n * int64(t.storage.dtype.Size())
		tensors[i], names[i] = t, name
	}
	for _, s := range r.order {
		n, err := storageBytes(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.path, err)
		}
		stored += n
	}
	if viewed > torchViewFactor*stored {
		return nil, fmt.Errorf("%s: the tensors view %d bytes of storages holding %d; a state dict views each stored byte at most %d times", r.path, viewed, stored, torchViewFactor)
	}
	out := make([]checkpoints.RawTensor, len(tensors))
	for i, t := range tensors {
		s := t.storage
		if !s.read {
			if err := r.loadStorage(s); err != nil {
				return nil, err
			}
			s.read = true
		}
		out[i] = checkpoints.RawTensor{Name: names[i], DType: s.dtype, Shape: t.shape, Data: t.bytes()}
	}
	return out, nil
}

// check verifies that the tensor lies inside its storage and returns its number of elements,
// which is at most the storage's (even a view with stride 0 may not hold more elements than it
// stores).
func (t *torchTensor) check() (int64, error) {
	n := t.storage.numel
	numel := int64(1)
	for _, d := range t.shape {
		if d == 0 {
			return 0, nil
		}
		if numel > n/int64(d) {
			return 0, fmt.Errorf("shape %v holds more elements than its storage %q (%d)", t.shape, t.storage.key, n)
		}
		numel *= int64(d)
	}
	last := t.offset // the highest element index the view reaches, at most n-1
	for i, d := range t.shape {
		if t.stride[i] == 0 {
			continue
		}
		if last >= n || int64(d-1) > (n-1-last)/int64(t.stride[i]) {
			last = n // past the end
			break
		}
		last += int64(d-1) * int64(t.stride[i])
	}
	if last >= n {
		return 0, fmt.Errorf("shape %v, stride %v and offset %d reach past the %d elements of storage %q", t.shape, t.stride, t.offset, n, t.storage.key)
	}
	return numel, nil
}

// bytes returns the tensor's elements in row-major order: a slice of the storage when the view
// is contiguous, a copy otherwise. check must have passed.
func (t *torchTensor) bytes() []byte {
	es := int64(t.storage.dtype.Size())
	numel := int64(1)
	contiguous := true
	for i := len(t.shape) - 1; i >= 0; i-- {
		if t.shape[i] != 1 && int64(t.stride[i]) != numel {
			contiguous = false
		}
		numel *= int64(t.shape[i])
	}
	if numel == 0 {
		return []byte{}
	}
	src := t.storage.data
	if contiguous {
		return src[t.offset*es : (t.offset+numel)*es]
	}
	out := make([]byte, 0, numel*es)
	idx := make([]int, len(t.shape))
	for range numel {
		at := t.offset
		for i, j := range idx {
			at += int64(j) * int64(t.stride[i])
		}
		out = append(out, src[at*es:(at+1)*es]...)
		for i := len(idx) - 1; i >= 0; i-- {
			if idx[i]++; idx[i] < t.shape[i] {
				break
			}
			idx[i] = 0
		}
	}
	return out
}
