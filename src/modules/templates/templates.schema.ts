import { type Static, Type } from '@sinclair/typebox';
import type { ContentFields } from '../content/stored-content.ts';

/** Route schemas of /v1/templates (docs/api.md "Templates"); they also drive the OpenAPI document. */

export const MAX_PART_CHARS = 512 * 1024;
export const MAX_DEFAULTS_BYTES = 64 * 1024;

const HeaderMap = Type.Record(Type.String({ maxLength: 128 }), Type.String({ maxLength: 4096 }), {
  maxProperties: 50,
});
const DataObject = Type.Record(Type.String(), Type.Unknown(), { maxProperties: 200 });

const name = Type.String({ minLength: 1, maxLength: 128 });
const description = Type.String({ maxLength: 1024 });
const subject = Type.String({ minLength: 1, maxLength: 998 });
const part = Type.String({ maxLength: MAX_PART_CHARS });
const mailbox = Type.String({ maxLength: 512 });

export const CreateTemplateBody = Type.Object(
  {
    name,
    description: Type.Optional(description),
    subject,
    text: Type.Optional(part),
    html: Type.Optional(part),
    from: Type.Optional(mailbox),
    reply_to: Type.Optional(mailbox),
    headers: Type.Optional(HeaderMap),
    defaults: Type.Optional(DataObject),
  },
  { additionalProperties: false },
);

/** Fields sent replace the latest draft's; null clears an optional one. */
export const UpdateTemplateBody = Type.Object(
  {
    name: Type.Optional(name),
    description: Type.Optional(Type.Union([description, Type.Null()])),
    subject: Type.Optional(subject),
    text: Type.Optional(Type.Union([part, Type.Null()])),
    html: Type.Optional(Type.Union([part, Type.Null()])),
    from: Type.Optional(Type.Union([mailbox, Type.Null()])),
    reply_to: Type.Optional(Type.Union([mailbox, Type.Null()])),
    headers: Type.Optional(HeaderMap),
    defaults: Type.Optional(DataObject),
  },
  { additionalProperties: false },
);

export const PreviewBody = Type.Object(
  {
    substitution_data: Type.Optional(DataObject),
    draft: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);

const nullable = <T extends ReturnType<typeof Type.String>>(t: T) => Type.Union([t, Type.Null()]);

export const TemplateVersion = Type.Object(
  {
    version: Type.Integer(),
    subject: Type.String(),
    text: nullable(Type.String()),
    html: nullable(Type.String()),
    from: nullable(Type.String()),
    reply_to: nullable(Type.String()),
    headers: Type.Record(Type.String(), Type.String()),
    defaults: Type.Record(Type.String(), Type.Unknown()),
    created_at: Type.String(),
  },
  { $id: 'TemplateVersion' },
);

export const Template = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    description: nullable(Type.String()),
    published: Type.Union([Type.Ref('TemplateVersion'), Type.Null()]),
    draft: Type.Union([Type.Ref('TemplateVersion'), Type.Null()]),
    created_at: Type.String(),
    updated_at: Type.String(),
  },
  { $id: 'Template' },
);

export const PreviewResult = Type.Object({
  subject: Type.String(),
  text: nullable(Type.String()),
  html: nullable(Type.String()),
});

export type CreateTemplateInput = Static<typeof CreateTemplateBody>;
export type UpdateTemplateInput = Static<typeof UpdateTemplateBody>;
export type PreviewInput = Static<typeof PreviewBody>;

/** A saved version: message content (its subject always set) with its defaults. */
export interface TemplateVersionView extends ContentFields {
  version: number;
  subject: string;
  defaults: Record<string, unknown>;
  created_at: string;
}

export interface TemplateView {
  id: string;
  name: string;
  description: string | null;
  published: TemplateVersionView | null;
  draft: TemplateVersionView | null;
  created_at: string;
  updated_at: string;
}
