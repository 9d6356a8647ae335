// Parsing of custom-action uploads: permission lists in every accepted spelling, and multipart bodies
// (built by undici's FormData, exactly as a client sends them) including the ones uWS alone lets slip.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_MODULE_BYTES, multipartBoundary, parseActionUpload } from '../../runtime/actions/multipart-upload.ts';
import { parsePermissionList, parsePermissionText } from '../../runtime/actions/permissions.ts';
import { InputError } from '../../runtime/errors.ts';

function expectInputError(run: () => unknown, status: number, code: string, field?: string): InputError {
  try {
    run();
  } catch (error) {
    assert.ok(error instanceof InputError, String(error));
    assert.equal(error.status, status, error.message);
    assert.equal(error.code, code, error.message);
    if (field !== undefined) assert.equal(error.field, field);
    return error;
  }
  return assert.fail('expected an InputError');
}

/** A real multipart body and its content type, as fetch would send `form`. */
async function encode(fields: Record<string, string | Uint8Array> | [string, string | Uint8Array][]): Promise<{ headers: Record<string, string>; body: Buffer }> {
  const form = new FormData();
  for (const [name, value] of Array.isArray(fields) ? fields : Object.entries(fields)) {
    if (typeof value === 'string') form.append(name, value);
    else form.append(name, new Blob([value]), `${name}.wasm`);
  }
  const request = new Request('http://local/', { method: 'POST', body: form });
  return { headers: { 'content-type': request.headers.get('content-type') ?? '' }, body: Buffer.from(await request.arrayBuffer()) };
}

const WASM = new Uint8Array([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0]);

describe('permissions', () => {
  it('accepts a JSON array, a comma list and a newline list, and removes duplicates', () => {
    const expected = ['read_secret:API_KEY', 'read_secret:TOKEN_2'];
    assert.deepEqual(parsePermissionText('["read_secret:API_KEY","read_secret:TOKEN_2","read_secret:API_KEY"]'), expected);
    assert.deepEqual(parsePermissionText(' read_secret:API_KEY , read_secret:TOKEN_2,'), expected);
    assert.deepEqual(parsePermissionText('read_secret:API_KEY\r\nread_secret:TOKEN_2\n\nread_secret:API_KEY\n'), expected);
    assert.deepEqual(parsePermissionText(''), []);
    assert.deepEqual(parsePermissionText('[]'), []);
  });

  it('names the bad entry', () => {
    expectInputError(() => parsePermissionText('read_secret:A,read_secret:B,read_secret:C,network:*'), 400, 'invalid_permission', 'permissions[3]');
    expectInputError(() => parsePermissionText('read_secret:lower'), 400, 'invalid_permission', 'permissions[0]');
    expectInputError(() => parsePermissionText(`read_secret:${'K'.repeat(65)}`), 400, 'invalid_permission', 'permissions[0]');
    expectInputError(() => parsePermissionList(['read_secret:A', 7]), 400, 'invalid_permission', 'permissions[1]');
    expectInputError(() => parsePermissionText('["read_secret:A"'), 400, 'invalid_permission', 'permissions');
    expectInputError(() => parsePermissionText('[{"a":1}]'), 400, 'invalid_permission', 'permissions[0]');
  });

  it('allows 25 distinct permissions, not 26; duplicates do not count', () => {
    const keys = (n: number) => Array.from({ length: n }, (_, i) => `read_secret:KEY_${i}`);
    assert.equal(parsePermissionList(keys(25)).length, 25);
    assert.equal(parsePermissionList([...keys(25), ...keys(25)]).length, 25);
    const error = expectInputError(() => parsePermissionList(keys(26)), 400, 'too_many_permissions', 'permissions');
    assert.match(error.message, /at most 25/);
  });
});

describe('multipart upload', () => {
  it('reads every field of a FormData body', async () => {
    const request = await encode({ name: '  Order risk  ', description: 'line 1\nline 2', permissions: 'read_secret:A', file: WASM });
    const upload = parseActionUpload(request, { requireName: true });
    assert.deepEqual([...upload.module], [...WASM]);
    assert.equal(upload.name, 'Order risk');
    assert.equal(upload.description, 'line 1\nline 2');
    assert.deepEqual(upload.permissions, ['read_secret:A']);
    const bare = parseActionUpload(await encode({ file: WASM }), { requireName: false });
    assert.equal('permissions' in bare, false, 'an absent permissions field is not "no permissions"');
  });

  it('copies the module out of the request body', async () => {
    const request = await encode({ name: 'copy', file: WASM });
    const upload = parseActionUpload(request, { requireName: true });
    request.body.fill(0);
    assert.deepEqual([...upload.module], [...WASM]);
  });

  it('415 for other media types; content types uWS alone misreads still work', async () => {
    const request = await encode({ name: 'ct', file: WASM });
    expectInputError(() => parseActionUpload({ ...request, headers: { 'content-type': 'application/json' } }, { requireName: true }), 415, 'unsupported_media_type');
    expectInputError(() => parseActionUpload({ ...request, headers: {} }, { requireName: true }), 415, 'unsupported_media_type');
    const boundary = multipartBoundary(request.headers['content-type']);
    for (const contentType of [`Multipart/Form-Data; boundary="${boundary}"`, `multipart/form-data; charset=utf-8; boundary=${boundary}`]) {
      assert.equal(parseActionUpload({ ...request, headers: { 'content-type': contentType } }, { requireName: true }).name, 'ct', contentType);
    }
    expectInputError(() => parseActionUpload({ ...request, headers: { 'content-type': 'multipart/form-data' } }, { requireName: true }), 400, 'malformed_multipart');
  });

  it('400 for garbage, a truncated body, unknown or repeated fields', async () => {
    const request = await encode({ name: 'x', file: WASM });
    expectInputError(() => parseActionUpload({ ...request, body: Buffer.from('garbage') }, { requireName: true }), 400, 'malformed_multipart');
    expectInputError(() => parseActionUpload({ ...request, body: request.body.subarray(0, request.body.length - 20) }, { requireName: true }), 400, 'malformed_multipart');
    const unknown = await encode({ name: 'x', permisions: 'read_secret:A', file: WASM });
    expectInputError(() => parseActionUpload(unknown, { requireName: true }), 400, 'unknown_field', 'permisions');
    const twice = await encode([['name', 'x'], ['file', WASM], ['file', WASM]]);
    expectInputError(() => parseActionUpload(twice, { requireName: true }), 400, 'duplicate_field', 'file');
  });

  it('400 for a boundary inside a field, or a body cut where its content held the closing boundary; a boundary that only starts lines is fine', async () => {
    const part = (name: string, data: string | Uint8Array): Buffer =>
      Buffer.concat([Buffer.from(`--BND\r\nContent-Disposition: form-data; name="${name}"${typeof data === 'string' ? '' : '; filename="m.wasm"'}\r\n\r\n`), Buffer.from(data), Buffer.from('\r\n')]);
    const headers = { 'content-type': 'multipart/form-data; boundary=BND' };
    const closing = Buffer.from('--BND--\r\n');
    // uWS's getParts cut the description at "--BND" and dropped the permissions after it: 201 with none.
    const inside = Buffer.concat([part('name', 'split'), part('file', WASM), part('description', 'Split on --BND markers.'), part('permissions', 'read_secret:API_KEY'), closing]);
    const error = expectInputError(() => parseActionUpload({ headers, body: inside }, { requireName: true }), 400, 'malformed_multipart');
    assert.match(error.message, /boundary "BND" occurs inside a field's content/);
    // Cut short after a field whose content names the closing boundary.
    const cut = Buffer.concat([part('name', 'cut'), part('file', WASM), part('description', 'ends with --BND--')]);
    expectInputError(() => parseActionUpload({ headers, body: cut }, { requireName: true }), 400, 'malformed_multipart');
    // A line of content that starts with the boundary and goes on (--BNDxyz), or looks like the
    // closing delimiter (--BND--xyz): getParts cut the file there and dropped the permissions after it.
    for (const line of ['--BNDxyz more', '--BND--xyz']) {
      const file = Buffer.concat([WASM, Buffer.from(`\r\n${line}\r\nmore bytes`)]);
      const body = Buffer.concat([part('name', 'lines'), part('file', file), part('permissions', 'read_secret:API_KEY'), closing]);
      expectInputError(() => parseActionUpload({ headers, body }, { requireName: true }), 400, 'malformed_multipart');
    }
    // A delimiter line with white space after the boundary (RFC 2046 transport padding) or ended by a
    // bare LF: the parser does not read those, and the refusal says so (it blamed the content at byte 0).
    for (const opening of ['--BND \r\n', '--BND\n']) {
      const body = Buffer.concat([Buffer.from(opening), part('name', 'padded').subarray('--BND\r\n'.length), part('file', WASM), closing]);
      const refused = expectInputError(() => parseActionUpload({ headers, body }, { requireName: true }), 400, 'malformed_multipart');
      assert.match(refused.message, /^The multipart boundary line at byte 0 must end with CRLF right after the boundary/, JSON.stringify(opening));
    }
    // The same fields with the boundary text only at line starts (where it is a delimiter) parse whole.
    const whole = Buffer.concat([part('name', 'whole'), part('file', WASM), part('description', 'Split on markers.'), part('permissions', 'read_secret:API_KEY'), closing]);
    const upload = parseActionUpload({ headers, body: whole }, { requireName: true });
    assert.deepEqual([upload.name, upload.description, upload.permissions], ['whole', 'Split on markers.', ['read_secret:API_KEY']]);
  });

  it('400 naming the part the parser cannot read (10 header lines, or no blank line after its headers), never the parts before it kept and the rest dropped', () => {
    const headers = { 'content-type': 'multipart/form-data; boundary=BND' };
    const field = (name: string, data: string | Uint8Array, extra = ''): Buffer =>
      Buffer.concat([Buffer.from(`--BND\r\nContent-Disposition: form-data; name="${name}"${typeof data === 'string' ? '' : '; filename="m.wasm"'}\r\n${extra}\r\n`), Buffer.from(data), Buffer.from('\r\n')]);
    const closing = Buffer.from('--BND--\r\n');
    const nine = Array.from({ length: 9 }, (_, i) => `X-Extra-${i}: ${i}\r\n`).join('');
    const eight = Array.from({ length: 8 }, (_, i) => `X-Extra-${i}: ${i}\r\n`).join('');
    const noBlankLine = Buffer.from('--BND\r\nContent-Disposition: form-data; name="permissions"\r\nread_secret:C\r\n');
    for (const [what, permissions] of [['ten header lines', field('permissions', 'read_secret:A', nine)], ['no blank line', noBlankLine]] as const) {
      const body = Buffer.concat([field('file', WASM), permissions, field('description', 'narrower'), closing]);
      const refused = expectInputError(() => parseActionUpload({ headers, body }, { requireName: false }), 400, 'malformed_multipart');
      assert.match(refused.message, /^Part 2 of the multipart body cannot be read/, what);
    }
    // Nine header lines are read.
    const read = parseActionUpload({ headers, body: Buffer.concat([field('file', WASM), field('permissions', 'read_secret:A', eight), closing]) }, { requireName: false });
    assert.deepEqual(read.permissions, ['read_secret:A']);
  });

  it('400 without a file, with an empty file, a missing name or bad text; 413 past 8 MiB', async () => {
    const parse = async (fields: Record<string, string | Uint8Array>, requireName = true) => {
      const request = await encode(fields);
      return () => parseActionUpload(request, { requireName });
    };
    expectInputError(await parse({ name: 'x' }), 400, 'module_required', 'file');
    expectInputError(await parse({ name: 'x', file: new Uint8Array(0) }), 400, 'module_empty', 'file');
    expectInputError(await parse({ file: WASM }), 400, 'invalid_request', 'name');
    expectInputError(await parse({ name: '   ', file: WASM }), 400, 'invalid_request', 'name');
    expectInputError(await parse({ name: 'n'.repeat(121), file: WASM }), 400, 'invalid_request', 'name');
    expectInputError(await parse({ name: 'x', description: 'd'.repeat(2001), file: WASM }), 400, 'invalid_request', 'description');
    expectInputError(await parse({ name: 'x', permissions: 'read_secret:A\nwrite:B', file: WASM }), 400, 'invalid_permission', 'permissions[1]');
    assert.equal((await parse({ name: 'x', file: new Uint8Array(MAX_MODULE_BYTES) }))().module.byteLength, MAX_MODULE_BYTES);
    const error = expectInputError(await parse({ name: 'x', file: new Uint8Array(MAX_MODULE_BYTES + 1) }), 413, 'module_too_large', 'file');
    assert.match(error.message, /8388609 bytes; the limit is 8388608/);
  });
});
