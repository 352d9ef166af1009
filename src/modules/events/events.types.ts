/** Event types (docs/api.md "Events", docs/webhooks.md "Event payloads"). */
export const EVENT_TYPES = [
  'message.accepted',
  'message.suppressed',
  'message.delivered',
  'message.deferred',
  'message.bounced',
  'message.failed',
  'message.complained',
  'message.opened',
  'message.clicked',
  'message.unsubscribed',
  'webhook.test',
] as const;

export type EventType = (typeof EVENT_TYPES)[number];

export interface NewEvent {
  tenantId: string;
  type: EventType;
  transmissionId: string | null;
  messageId: string | null;
  recipient: string | null;
  mailType: string | null;
  tags: string[];
  /**
   * The metadata object, or its JSON text as already stored (a message row's `metadata`): text
   * is written to the event row as is, never parsed and serialized again.
   */
  metadata: Record<string, string> | string;
  data: Record<string, unknown>;
  /** The recipient's role (`to`, `cc`, `bcc`) when the message is part of a group message. */
  role?: string | null;
}

/** The public shape of an event (API and webhook bodies). */
export interface EventView {
  id: string;
  type: string;
  created_at: string;
  tenant_id: string;
  transmission_id: string | null;
  message_id: string | null;
  recipient: string | null;
  mail_type: string | null;
  tags: string[];
  metadata: Record<string, string>;
  data: Record<string, unknown>;
  /** Only on events of a group message's messages: how the recipient was addressed. */
  role?: string;
}
