-- Quotes grouped by author, from the quotes example's SQLite export:
--   crawlfleet export --state .crawlfleet -o quotes.sqlite
--   sqlite3 quotes.sqlite < examples/quotes/by_author.sql
-- One row per author: name, key (slug) and a JSON array of their quotes' texts.
SELECT json_extract(author.data, '$.name') AS name,
       author.item_key AS key,
       json_group_array(json_extract(quote.data, '$.text')) AS quotes
FROM items AS author
JOIN items AS quote
  ON quote.item_type = 'quote'
 AND json_extract(quote.data, '$.author_key') = author.item_key
WHERE author.item_type = 'author'
GROUP BY author.item_key
ORDER BY name;
