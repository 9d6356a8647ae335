// The TypeScript client of Sluice: the REST API bound to one organization, live run updates with
// resume handled, and a device connection that loses nothing. README.md in this folder shows each.

export { SluiceClient, type CallOptions, type ClientOptions, type RequestOptions, type RetryNotice } from './api-client.ts';
export { SluiceApiError, SluiceArgumentError, SluiceNetworkError } from './api-errors.ts';
export { uploadAction, uploadActionVersion, type UploadedAction } from './action-upload.ts';
export type { AttemptError, Environment, EventDetails, EventRecording, EventReplay, FailedEvent, ReplayMade, Run, RunAttempt, RunFailureReason, RunStep, RunSummary, SluiceEvent } from './api-types.ts';
export { LiveClosedError, LiveSubscription, watchRuns, type RunUpdate, type WatchOptions } from './live-subscription.ts';
export { DeviceConnection, DeviceError, connectDevice, type Acked, type DeviceMessage, type DeviceOptions } from './device-connection.ts';
export type { Sleep } from './retry.ts';
