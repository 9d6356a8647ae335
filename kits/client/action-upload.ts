// Custom action modules from a program (a CI job shipping a new build): the API takes them as
// multipart/form-data, which the client's JSON calls cannot send. Each upload is one attempt, never
// retried (a lost answer may still have made the action or version: list them before sending again).

import type { SluiceClient, CallOptions } from './api-client.ts';
import { pathId } from './request-arguments.ts';

/** What an upload answers: the action, with the version just made (`pending_review` until an admin approves it). */
export interface UploadedAction {
  readonly custom_action: { readonly id: string; readonly name: string; readonly [field: string]: unknown };
  readonly [field: string]: unknown;
}

/** A module's bytes as a multipart file part. */
const modulePart = (wasm: Uint8Array): Blob => new Blob([wasm], { type: 'application/wasm' });

/** Uploads a new custom action (`POST …/custom-actions`); `permissions` such as `read_secret:API_KEY`. */
export async function uploadAction(client: SluiceClient, action: { name: string; wasm: Uint8Array; description?: string; permissions?: readonly string[] }, call: CallOptions = {}): Promise<UploadedAction> {
  const form = new FormData();
  form.append('name', action.name);
  if (action.description !== undefined) form.append('description', action.description);
  if (action.permissions !== undefined) form.append('permissions', JSON.stringify(action.permissions));
  form.append('file', modulePart(action.wasm), `${action.name}.wasm`);
  return client.request<UploadedAction>('POST', '/custom-actions', { ...call, form, expect: 'custom_action' });
}

/** Uploads a new version of the action `actionId` (`POST …/custom-actions/:id/versions`); the approved one keeps running until the new one is approved. */
export async function uploadActionVersion(client: SluiceClient, actionId: string, wasm: Uint8Array, call: CallOptions = {}): Promise<UploadedAction> {
  const form = new FormData();
  form.append('file', modulePart(wasm), 'module.wasm');
  return client.request<UploadedAction>('POST', `/custom-actions/${pathId('The action id', actionId)}/versions`, { ...call, form, expect: 'custom_action' });
}
