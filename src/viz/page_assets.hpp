// The pages' templates, style sheet and scripts (src/viz/explorer/, src/viz/report/), compiled
// in so that the library writes self-contained pages with no files to install. Internal.
#pragma once

namespace attn::viz {

extern const char* const
    kExplorerHtml;  // placeholders {{TITLE}} {{SUBTITLE}} {{CSS}} {{JS}} {{DATA}}
extern const char* const kExplorerCss;
extern const char* const kExplorerJs;
extern const char* const kReportHtml;  // placeholders {{TITLE}} {{JS}} {{DATA}}
extern const char* const kReportJs;

}  // namespace attn::viz
