// The explorer page's template, style sheet and script (src/viz/explorer/), compiled in so
// that the library writes a self-contained page with no files to install. Internal.
#pragma once

namespace attn::viz {

extern const char* const
    kExplorerHtml;  // placeholders {{TITLE}} {{SUBTITLE}} {{CSS}} {{JS}} {{DATA}}
extern const char* const kExplorerCss;
extern const char* const kExplorerJs;

}  // namespace attn::viz
