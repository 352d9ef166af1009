import { Postyard } from '@postyard/client';

const client = new Postyard({ apiKey: process.env.POSTYARD_KEY!, baseUrl: process.env.POSTYARD_URL! });
await client.transmissions.send({ recipients: [{ email: 'ann@example.com' }], content: { subject: 'Hi', text: 'Hi' } });
