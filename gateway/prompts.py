"""The query-side prompts: keyword extraction and the answer (LightRAG's structure, our wording).

The answer prompt mirrors LightRAG's ``rag_response`` + ``kg_query_context``: a system
message holding the instructions and the context (entities and relations as JSON lines,
document chunks as JSON lines tagged with a reference id, then the reference list), the
conversation history as real chat turns, and the question as the last user message.
"""

from __future__ import annotations

KEYWORDS_PROMPT_VERSION = "kgstream-keywords-1"

KEYWORDS_SYSTEM = """---Role---
You extract search keywords from a user's question for a retrieval system that searches \
a knowledge graph (entities and the relations between them) and document chunks.

---Goal---
Return two lists of keywords:
1. "high_level_keywords": overarching concepts or themes: the intent of the question, \
its subject area, the kind of relation asked about.
2. "low_level_keywords": specific entities and details: proper nouns, names of people, \
organisations, places, products, technical terms, concrete items.

---Rules---
1. Output one valid JSON object and nothing else: no explanation, no markdown fences.
2. Every keyword comes from the question itself. Prefer meaningful multi-word phrases \
("latest financial report", "Apple Inc.") to their single words.
3. For a question too vague to search ("hello", "ok"), return two empty lists.

---Examples---
Question: "How does international trade influence global economic stability?"
Output: {"high_level_keywords": ["International trade", "Global economic stability", \
"Economic impact"], "low_level_keywords": ["Trade agreements", "Tariffs", \
"Currency exchange", "Imports", "Exports"]}

Question: "Who leads the Atlas Project at Northwind Labs?"
Output: {"high_level_keywords": ["Project leadership", "Organisation"], \
"low_level_keywords": ["Atlas Project", "Northwind Labs"]}"""

KEYWORDS_USER = """Question: {question}
Output:"""

ANSWER_SYSTEM = """---Role---
You are a helpful assistant answering the user's question from the Knowledge Graph \
and Document Chunks given below in JSON format.

---Goal---
Write a response grounded in the Knowledge Base below, considering the conversation \
history when there is one. Use only information the Knowledge Base provides.

---Knowledge Graph and Document Chunks---
{context_data}

---Response Guidelines---
1. Content:
- Stick to the context above; never invent, assume or add facts that are not in it.
- If the context does not hold the answer, say that you do not have enough information.
- Keep continuity with the conversation history.
2. Format and language:
- Use markdown, with section headings where they help.
- Answer in the language of the user's question.
- Target format and length: {response_type}
3. References:
- End with a "References" section citing at most 5 of the sources you used, as \
`[n] file_path` with the reference ids of the Reference Document List.

---User Context---
- Additional user prompt: {user_prompt}

---Response---"""

CONTEXT_TEMPLATE = """Knowledge Graph Data (Entity):

```json
{entities}
```

Knowledge Graph Data (Relationship):

```json
{relations}
```

Document Chunks (each entry has a reference_id that refers to the Reference Document List):

```json
{chunks}
```

Reference Document List (each entry starts with the [reference_id] its chunks carry):

```
{references}
```"""

NO_CONTEXT_ANSWER = (
    "Sorry, I'm not able to provide an answer to that question: nothing in the index "
    "matches it. [no-context]"
)
"""Returned without calling the LLM when retrieval finds nothing (LightRAG's fail_response)."""
