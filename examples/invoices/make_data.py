#!/usr/bin/env python3
"""Writes data.jsonl from the invoices below (written by hand for llamay's example set).

Each entry: the invoice text, then the expected object. `quote` is the span the total
is read from; the script checks it occurs verbatim in the text. Run from this folder:
    python3 make_data.py
"""
import json

C, A, N = "clear", "ambiguous", "not_found"

INVOICES = [
    ("inv-001", "ACME Office Supplies Ltd\n12 High Street, Leeds LS1 4AB\nInvoice no. 10443\nDate: 3 March 2025\n\n2 x Toner cartridge   £89.98\n1 x A4 paper (5 reams) £21.50\nSubtotal £111.48\nVAT 20% £22.30\nTotal due: £133.78\n",
     "ACME Office Supplies Ltd", 133.78, "GBP", C, "Total due: £133.78"),
    ("inv-002", "RECHNUNG Nr. 2025-0117\nMüller & Söhne GmbH\nHauptstraße 5, 80331 München\n\nBeratung (8 Std.)      960,00 €\nReisekosten            145,20 €\nNetto                1.105,20 €\nMwSt. 19 %             209,99 €\nGesamtbetrag         1.315,19 €\n",
     "Müller & Söhne GmbH", 1315.19, "EUR", C, "Gesamtbetrag         1.315,19 €"),
    ("inv-003", "Facture n° F-88213\nBoulangerie Dupont SARL — 4 rue des Lilas, 69003 Lyon\n\nPains spéciaux x 40 ........ 120,00 EUR\nViennoiseries x 60 ......... 84,00 EUR\nTotal HT : 204,00 EUR\nTVA 5,5 % : 11,22 EUR\nTotal TTC : 215,22 EUR\n",
     "Boulangerie Dupont SARL", 215.22, "EUR", C, "Total TTC : 215,22 EUR"),
    ("inv-004", "INVOICE\nBlue Ridge Web Services LLC\nAsheville, NC 28801\nBill to: Carter & Co.\nHosting (12 months)  $1,188.00\nSSL certificate      $79.00\nSales tax (7%)       $88.69\nAMOUNT DUE           $1,355.69\n",
     "Blue Ridge Web Services LLC", 1355.69, "USD", C, "AMOUNT DUE           $1,355.69"),
    ("inv-005", "Rechnung 4471\nAlpenblick Treuhand AG, Bahnhofstrasse 10, 8001 Zürich\nBuchhaltung Q1        CHF 2'400.00\nMWST 8.1 %            CHF 194.40\nTotal                 CHF 2'594.40\nZahlbar innert 30 Tagen.\n",
     "Alpenblick Treuhand AG", 2594.40, "CHF", C, "Total                 CHF 2'594.40"),
    ("inv-006", "Factura 2025/311\nTalleres Hermanos Ruiz S.L.\nCalle Mayor 22, 28013 Madrid\nCambio de aceite y filtros   95,00 €\nPastillas de freno          160,00 €\nIVA 21%                      53,55 €\nTOTAL                       308,55 €\n",
     "Talleres Hermanos Ruiz S.L.", 308.55, "EUR", C, "TOTAL                       308,55 €"),
    ("inv-007", "Fattura n. 77/2025\nStudio Grafico Bellini s.r.l., Via Roma 8, Firenze\nLogo e identità visiva  € 1.500,00\nIVA 22%                 € 330,00\nTotale fattura          € 1.830,00\n",
     "Studio Grafico Bellini s.r.l.", 1830.00, "EUR", C, "Totale fattura          € 1.830,00"),
    ("inv-008", "Factuur 2025-0042\nVan Dijk Installatietechniek B.V.\nKeizersgracht 101, Amsterdam\nCV-ketel onderhoud       €  145,00\nBTW 21%                  €   30,45\nTe betalen               €  175,45\n",
     "Van Dijk Installatietechniek B.V.", 175.45, "EUR", C, "Te betalen               €  175,45"),
    ("inv-009", "Northwind Traders | Invoice #NW-5521 | 14/02/2025\nItems: 3 chairs @ 120.00, 1 desk @ 340.00\nTotal: 700.00\nPayment within 14 days.\n",
     "Northwind Traders", 700.00, None, C, "Total: 700.00"),
    ("inv-010", "Receipt\nThank you for shopping with us!\n1 x Coffee beans 1kg   18.90\n2 x Milk frother        31.80\nTOTAL EUR 50.70\n",
     None, 50.70, "EUR", C, "TOTAL EUR 50.70"),
    ("inv-011", "Pro-forma — not a tax invoice\nGreenfield Landscaping Ltd\nQuote for garden redesign: materials and labour to be confirmed after site visit.\nWe will send the final invoice once the work is scheduled.\n",
     "Greenfield Landscaping Ltd", None, None, N, None),
    ("inv-012", "Statement of account\nCustomer: J. Alvarez\nPrevious balance carried forward. Please contact our office for the amount outstanding.\nReference: SA-2025-03\n",
     None, None, None, N, None),
    ("inv-013", "Harbour Fish Co.\nInvoice 9981\nFresh cod 12 kg\nMussels 8 kg\nDelivery Tuesday morning\nAmount: 264,40\n",
     "Harbour Fish Co.", 264.40, None, C, "Amount: 264,40"),
    ("inv-014", "TAX INVOICE\nSunrise Bakery Pty — 55 George St\nSourdough x 30    £75.00\nCroissants x 50   £65.00\nGrand total       £140.00\n(Deposit of £40.00 already paid; balance £100.00)\n",
     "Sunrise Bakery Pty", 140.00, "GBP", A, "Grand total       £140.00"),
    ("inv-015", "Rechnung\nElektro Huber e.K., Lindenweg 3, 5020 Salzburg\nAustausch Sicherungskasten\nArbeitszeit 3 h à 68,00\nMaterial 212,50\nSumme brutto: EUR 460,90\n",
     "Elektro Huber e.K.", 460.90, "EUR", C, "Summe brutto: EUR 460,90"),
    ("inv-016", "INVOICE 2025-88\nFrom: Quillfeather Editorial Services\nTo: Larkspur Press\nCopy-editing, 84,000 words at $0.015/word\nTotal: USD 1,260.00\n",
     "Quillfeather Editorial Services", 1260.00, "USD", C, "Total: USD 1,260.00"),
    ("inv-017", "Facture\nCabinet Lefèvre & Associés\n15 boulevard Haussmann, Paris\nHonoraires juridiques (février)\nMontant TTC : 3 240,00 €\n",
     "Cabinet Lefèvre & Associés", 3240.00, "EUR", C, "Montant TTC : 3 240,00 €"),
    ("inv-018", "Delivery note DN-2231\nSupplier: Kestrel Metals plc\n40 x steel brackets\n20 x hinges\nGoods received in good condition. Invoice to follow.\n",
     "Kestrel Metals plc", None, None, N, None),
    ("inv-019", "Invoice\nOrder 55-210\nWidgets (box of 100)  2 @ 45.00 = 90.00\nShipping 12.50\nTotal 102.50 USD\n",
     None, 102.50, "USD", C, "Total 102.50 USD"),
    ("inv-020", "Rechnung Nr. 1187\nSchreinerei Baumann GmbH\nEinbauschrank Eiche, nach Mass\nPauschal CHF 4'850.--\ninkl. MWST\n",
     "Schreinerei Baumann GmbH", 4850.00, "CHF", C, "Pauschal CHF 4'850.--"),
    ("inv-021", "Fiona's Flowers\nWedding order #W-77\nBridal bouquet, 6 buttonholes, table arrangements x 12\nTotal to pay: £1,045\nThank you!\n",
     "Fiona's Flowers", 1045.00, "GBP", C, "Total to pay: £1,045"),
    ("inv-022", "Invoice INV-3001\nBrightSpark Electrical\nLabour 4.5h @ 55/h 247.50\nParts 133.20\nTotal 380.70\nTotal incl. 20% VAT 456.84\n",
     "BrightSpark Electrical", 456.84, None, A, "Total incl. 20% VAT 456.84"),
    ("inv-023", "Factura simplificada\nCafetería La Plaza\n2 cafés con leche 3,60\n1 tostada 2,50\nTotal: 6,10 €\n",
     "Cafetería La Plaza", 6.10, "EUR", C, "Total: 6,10 €"),
    ("inv-024", "Membership renewal\nDear member, your annual membership will renew on 1 April.\nThe club committee will confirm this year's fee at the general meeting.\n",
     None, None, None, N, None),
    ("inv-025", "INVOICE\nOrion Data Systems Inc.\n200 Market St, San Francisco CA\nLicense renewal (25 seats)      $12,500.00\nSupport plan                     $2,500.00\nDiscount                        -$1,000.00\nTotal                           $14,000.00\n",
     "Orion Data Systems Inc.", 14000.00, "USD", C, "Total                           $14,000.00"),
    ("inv-026", "Rechnung 2025/09\nPraxis Dr. med. Weber\nBehandlung vom 12.02.2025\nGOÄ-Ziffern 1, 5, 250\nRechnungsbetrag: 87,43 EUR\n",
     "Praxis Dr. med. Weber", 87.43, "EUR", C, "Rechnungsbetrag: 87,43 EUR"),
    ("inv-027", "Facture proforma\nAtelier Moreau\nRestauration d'un fauteuil Louis XV\nDevis à confirmer après inspection — prix non fixé.\n",
     "Atelier Moreau", None, None, N, None),
    ("inv-028", "Invoice no. 604\nPeak District Outdoor Gear\nWalking boots        £120.00\nWaterproof jacket    £95.00\nSubtotal            £215.00\nTotal (VAT incl.)   £215.00\n",
     "Peak District Outdoor Gear", 215.00, "GBP", C, "Total (VAT incl.)   £215.00"),
    ("inv-029", "Bill\nTable 12 — 4 guests\nStarters 32.00\nMains 88.00\nWine 45.00\nService not included\nTotal 165.00\n",
     None, 165.00, None, C, "Total 165.00"),
    ("inv-030", "Fattura 12/B\nFerramenta Rossi di Luca Rossi\nViti, bulloni, tasselli\nTotale: 48,30\n",
     "Ferramenta Rossi di Luca Rossi", 48.30, None, C, "Totale: 48,30"),
    ("inv-031", "INVOICE #A-1009\nCobalt Consulting Group\nStrategy workshop (2 days)   EUR 6,000.00\nTravel expenses              EUR   412.35\nTOTAL                        EUR 6,412.35\n",
     "Cobalt Consulting Group", 6412.35, "EUR", C, "TOTAL                        EUR 6,412.35"),
    ("inv-032", "Rekening\nFietsenmaker De Snelle Spaak\nNieuwe ketting en remblokken\nTotaal: € 64,95\n",
     "Fietsenmaker De Snelle Spaak", 64.95, "EUR", C, "Totaal: € 64,95"),
    ("inv-033", "Invoice\nTimber & Twine Ltd\nOak shelving x 3\nPlease see the attached price list; the total will be confirmed on delivery.\n",
     "Timber & Twine Ltd", None, None, N, None),
    ("inv-034", "Rechnung\nBergbahnen Engelberg\nSkipass 6 Tage Erwachsene 2 x 378.00\nTotal CHF 756.00\n",
     "Bergbahnen Engelberg", 756.00, "CHF", C, "Total CHF 756.00"),
    ("inv-035", "Invoice 2211\nLighthouse Translation Services\nGerman > English, 3,200 words\nTotal due: 480.00\nCurrency as agreed in the contract.\n",
     "Lighthouse Translation Services", 480.00, None, A, "Total due: 480.00"),
    ("inv-036", "Parking receipt\nEntry 08:12, exit 17:40\nAmount paid: $24.00\n",
     None, 24.00, "USD", C, "Amount paid: $24.00"),
    ("inv-037", "Factura Nº 0098\nImprenta Gutiérrez\nFolletos A5, 2.000 unidades\nBase imponible 380,00\nIVA 21% 79,80\nTotal factura 459,80 EUR\n",
     "Imprenta Gutiérrez", 459.80, "EUR", C, "Total factura 459,80 EUR"),
    ("inv-038", "Order confirmation\nThank you for your order with Maple & Moss.\nYour items will ship in 3-5 working days.\nAn invoice will be emailed once payment is taken.\n",
     "Maple & Moss", None, None, N, None),
    ("inv-039", "INVOICE\nRedwood Plumbing\nCall-out fee 60\nReplace washer 15\nTotal: 75\n",
     "Redwood Plumbing", 75.00, None, C, "Total: 75"),
    ("inv-040", "Rechnung Nr. 5512\nBuchhandlung Schiller OHG\n3 Bücher laut Lieferschein\nEndbetrag: 56,85 €\nEnthaltene MwSt. 7 %: 3,72 €\n",
     "Buchhandlung Schiller OHG", 56.85, "EUR", C, "Endbetrag: 56,85 €"),
    ("inv-041", "Invoice\nSupplier: Hollis & Grant Architects\nDesign stage 2 fee\nAmount: £4,200.00 + VAT\n",
     "Hollis & Grant Architects", None, "GBP", A, None),
    ("inv-042", "Note de frais\nDéplacement Paris–Lille\nTrain 2e classe, repas\nÀ rembourser : 112,40\n",
     None, 112.40, None, C, "À rembourser : 112,40"),
    ("inv-043", "TAX INVOICE\nKiwi Coffee Roasters\n20 kg house blend\nTotal: $640.00 USD\n",
     "Kiwi Coffee Roasters", 640.00, "USD", C, "Total: $640.00 USD"),
    ("inv-044", "Rechnung\nIhr Malerbetrieb\nAnstrich Treppenhaus\nDer Betrag wird nach Abnahme in Rechnung gestellt.\n",
     None, None, None, N, None),
]

def main():
    ids = set()
    with open("data.jsonl", "w", encoding="utf-8") as out:
        for (id_, text, supplier, total, currency, confidence, quote) in INVOICES:
            assert id_ not in ids, id_
            ids.add(id_)
            if supplier is not None:
                assert supplier in text, (id_, supplier)
            if quote is not None:
                assert quote in text, (id_, quote)
            expected = {"supplier_name": supplier, "invoice_total": total, "currency": currency,
                        "confidence": confidence, "source_quote": quote}
            out.write(json.dumps({"id": id_, "input": text, "expected": expected},
                                 ensure_ascii=False) + "\n")
    nulls = sum(1 for i in INVOICES if i[2] is None or i[3] is None or i[4] is None)
    print(f"{len(INVOICES)} invoices, {nulls} with no supplier, total or currency")

main()
