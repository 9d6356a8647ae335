// Branded id types shared by the run core, the workflow documents and the shell.
// A brand is compile-time only: the shell brands a string once, where it was parsed or minted.

export type OrgId = string & { readonly __brand: 'OrgId' };
export type WorkflowId = string & { readonly __brand: 'WorkflowId' };
export type StepId = string & { readonly __brand: 'StepId' };
export type RunId = string & { readonly __brand: 'RunId' };
export type EventId = string & { readonly __brand: 'EventId' };

/** Brands an already-validated string. Validation belongs to the parser that produced it. */
export const asOrgId = (value: string): OrgId => value as OrgId;
export const asWorkflowId = (value: string): WorkflowId => value as WorkflowId;
export const asStepId = (value: string): StepId => value as StepId;
export const asRunId = (value: string): RunId => value as RunId;
export const asEventId = (value: string): EventId => value as EventId;
