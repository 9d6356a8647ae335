// Guest modules for hook-runner tests, written in WAT and assembled with wabt: a well-behaved echo,
// constant outputs, and hostile guests (endless loop, recursion, traps, a WASI import).
import wabtInit from 'wabt';

type Wabt = Awaited<ReturnType<typeof wabtInit>>;
let wabt: Promise<Wabt> | undefined;

/** `names`: keep the `$names` in the module's name section (traps then name their frames). */
export async function assembleWat(name: string, text: string, options: { names?: boolean } = {}): Promise<Uint8Array> {
  wabt ??= wabtInit();
  const module = (await wabt).parseWat(`${name}.wat`, text);
  try {
    module.validate();
    return new Uint8Array(module.toBinary({ write_debug_names: options.names === true }).buffer);
  } finally {
    module.destroy();
  }
}

const watString = (text: string): string =>
  [...Buffer.from(text, 'utf8')].map((byte) => `\\${byte.toString(16).padStart(2, '0')}`).join('');

/** A bump allocator that grows memory as needed; fresh bytes are zero, so input is NUL-terminated. */
const ALLOC = `
  (global $bump (mut i32) (i32.const 1024))
  (func $alloc (export "alloc") (param $len i32) (result i32)
    (local $p i32) (local $end i32)
    (local.set $p (global.get $bump))
    (local.set $end (i32.add (local.get $p) (i32.add (local.get $len) (i32.const 1))))
    (block $ok
      (loop $grow
        (br_if $ok (i32.le_u (local.get $end) (i32.mul (memory.size) (i32.const 65536))))
        (if (i32.eq (memory.grow (i32.const 1)) (i32.const -1)) (then (unreachable)))
        (br $grow)))
    (global.set $bump (local.get $end))
    (local.get $p))`;

/** Outputs its whole input envelope: the test sees exactly what the guest was given. */
export const ECHO_WAT = `(module (memory (export "memory") 1) ${ALLOC}
  (func (export "execute") (param $ptr i32) (param $len i32) (result i32) (local.get $ptr)))`;

/**
 * Outputs `{"hex":"<its input envelope, hex-encoded>"}`: the test sees exactly what the guest was
 * given, secrets included, where the runner's masking of secrets in outputs cannot recognise them.
 */
export const HEX_ECHO_WAT = `(module (memory (export "memory") 1) ${ALLOC}
  (data (i32.const 0) "0123456789abcdef")
  (data (i32.const 16) "{\\"hex\\":\\"")
  (func (export "execute") (param $ptr i32) (param $len i32) (result i32)
    (local $out i32) (local $i i32) (local $byte i32) (local $at i32)
    (local.set $out (call $alloc (i32.add (i32.shl (local.get $len) (i32.const 1)) (i32.const 16))))
    (i64.store (local.get $out) (i64.load (i32.const 16)))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $len)))
        (local.set $byte (i32.load8_u (i32.add (local.get $ptr) (local.get $i))))
        (local.set $at (i32.add (i32.add (local.get $out) (i32.const 8)) (i32.shl (local.get $i) (i32.const 1))))
        (i32.store8 (local.get $at) (i32.load8_u (i32.shr_u (local.get $byte) (i32.const 4))))
        (i32.store8 (i32.add (local.get $at) (i32.const 1)) (i32.load8_u (i32.and (local.get $byte) (i32.const 15))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (local.set $at (i32.add (i32.add (local.get $out) (i32.const 8)) (i32.shl (local.get $len) (i32.const 1))))
    (i32.store8 (local.get $at) (i32.const 34))
    (i32.store8 (i32.add (local.get $at) (i32.const 1)) (i32.const 125))
    (i32.store8 (i32.add (local.get $at) (i32.const 2)) (i32.const 0))
    (local.get $out)))`;

/** The envelope a HEX_ECHO_WAT guest was given, from its output. */
export const fromHexEcho = (outputJson: string): Record<string, unknown> =>
  JSON.parse(Buffer.from((JSON.parse(outputJson) as { hex: string }).hex, 'hex').toString('utf8')) as Record<string, unknown>;

/** Outputs `text` (stored NUL-terminated at address 16), whatever the input. */
export const constantWat = (text: string): string => `(module (memory (export "memory") 1)
  (data (i32.const 16) "${watString(text)}\\00")
  (func (export "execute") (param i32 i32) (result i32) (i32.const 16)))`;

export const REJECT_WAT = `(module (memory (export "memory") 1)
  (func (export "execute") (param i32 i32) (result i32) (i32.const 0)))`;

const hostile = (body: string, extra = ''): string => `(module (memory (export "memory") 1) ${extra}
  (func (export "execute") (param $ptr i32) (param $len i32) (result i32) ${body}))`;

export const HOSTILE_WAT = {
  loop: hostile('(loop $forever (br $forever)) (i32.const 0)'),
  recursion: hostile('(call $down (i32.const 0))', '(func $down (param i32) (result i32) (call $down (i32.add (local.get 0) (i32.const 1))))'),
  unreachable: hostile('(unreachable)'),
  outOfBounds: hostile('(i32.load (i32.const -16))'),
  divideByZero: hostile('(i32.div_u (local.get $len) (i32.sub (local.get $len) (local.get $len)))'),
  wasiImport: `(module
    (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
    (memory (export "memory") 1)
    (func (export "execute") (param i32 i32) (result i32) (i32.const 0)))`,
} as const;

export type HostileName = keyof typeof HOSTILE_WAT;
