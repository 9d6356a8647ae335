// Test fixtures for custom actions over HTTP: guest modules assembled from WAT, multipart uploads
// sent with fetch + FormData (as any client would), API keys of each role, and a runtime with its
// hook-runner child and one org.

import type { CallResult } from '../helpers/http.ts';
import { call, createOrg, readResult } from '../helpers/http.ts';
import { ADMIN_TOKEN, startRuntime, type TestRuntime } from '../helpers/runtime.ts';
import { assembleWat, constantWat, ECHO_WAT, HOSTILE_WAT, REJECT_WAT } from '../helpers/hook-runner-wat.ts';

export interface ActionModules {
  /** Outputs its whole envelope: payload, secrets, permissions, action. */
  readonly echo: Uint8Array;
  /** Outputs a document with a well-formed projection. */
  readonly projection: Uint8Array;
  /** Outputs a projection whose entity_type breaks the contract. */
  readonly badProjection: Uint8Array;
  readonly reject: Uint8Array;
  readonly trap: Uint8Array;
  /** Imports a WASI function: refused at compile time. */
  readonly withImport: Uint8Array;
}

export async function buildModules(): Promise<ActionModules> {
  return {
    echo: await assembleWat('echo', ECHO_WAT),
    projection: await assembleWat('projection', constantWat(JSON.stringify({
      score: 7,
      projection: { name: 'order-risk', entity_type: 'order', entity_id: 'ord_1', status: 'review', data: { score: 7 } },
    }))),
    badProjection: await assembleWat('bad-projection', constantWat(JSON.stringify({ projection: { name: 'order-risk', entity_type: 'Order Type', entity_id: 'ord_1' } }))),
    reject: await assembleWat('reject', REJECT_WAT),
    trap: await assembleWat('trap', HOSTILE_WAT.unreachable),
    withImport: await assembleWat('with-import', HOSTILE_WAT.wasiImport),
  };
}

export type FormFields = Record<string, string | Uint8Array>;

/** POSTs `fields` as multipart/form-data (byte fields become file parts). */
export async function upload(baseUrl: string, path: string, token: string, fields: FormFields): Promise<CallResult> {
  const form = new FormData();
  for (const [name, value] of Object.entries(fields)) {
    if (typeof value === 'string') form.append(name, value);
    else form.append(name, new Blob([value], { type: 'application/wasm' }), `${name}.wasm`);
  }
  return readResult(await fetch(`${baseUrl}${path}`, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: form }));
}

/** Uploads `wasm` as a custom action of `orgId` and approves its version 1 with the org's admin key; resolves with the action's id. */
export async function uploadApproved(baseUrl: string, orgId: string, adminKey: string, name: string, wasm: Uint8Array): Promise<string> {
  const uploaded = await upload(baseUrl, `/organizations/${orgId}/custom-actions`, adminKey, { name, file: wasm });
  if (uploaded.status !== 201) throw new Error(`uploading ${name} failed: ${uploaded.status} ${uploaded.text}`);
  const actionId = uploaded.body.custom_action.id as string;
  const reviewed = await call(baseUrl, 'POST', `/organizations/${orgId}/custom-actions/${actionId}/review`, { token: adminKey, json: { status: 'approved', version: 1 } });
  if (reviewed.status !== 200) throw new Error(`approving ${name} failed: ${reviewed.status} ${reviewed.text}`);
  return actionId;
}

/** A new API key of `role` in `orgId` (its secret and its id), issued with that org's admin key. */
export async function keyWithRole(baseUrl: string, orgId: string, adminKey: string, role: 'viewer' | 'developer' | 'admin'): Promise<{ key: string; id: string }> {
  const issued = await call(baseUrl, 'POST', `/organizations/${orgId}/api-keys`, { token: adminKey, json: { role } });
  if (issued.status !== 201) throw new Error(`issuing a ${role} key failed: ${issued.status} ${issued.text}`);
  return { key: issued.body.key as string, id: issued.body.id as string };
}

/** A runtime with its hook-runner child (Wasmtime), the org `orgId` made in it (its admin key), and the test modules. */
export async function startActionRuntime(orgId: string): Promise<{ rt: TestRuntime; key: string; modules: ActionModules }> {
  const modules = await buildModules();
  const rt = await startRuntime({ args: ['--runner', 'child'] });
  return { rt, key: await createOrg(rt.url, ADMIN_TOKEN, orgId), modules };
}
